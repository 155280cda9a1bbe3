//! Q2_K (ggml id 10): 256 values in 84 bytes. Spec: formats.md §4.9. GPU twin: shaders/formats/q2_k.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 84;
/// `scales[16]`: per 16 elements, low nibble = scale code, high nibble = min code.
pub const SCALES: usize = 0;
/// `qs[64]`: 2-bit codes; each byte holds four elements 32 apart within a 128-element half.
pub const QS: usize = 16;
/// `d`: f16 super-scale of the scales.
pub const D: usize = 80;
/// `dmin`: f16 super-scale of the mins.
pub const DMIN: usize = 82;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::bytes("scales", SCALES, ELEMS / 16),
    Field::bytes("qs", QS, ELEMS / 4),
    Field::f16("d", D),
    Field::f16("dmin", DMIN),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per half (one pass over 32 `qs` bytes).
const HALF: usize = 128;
/// Elements sharing one 2-bit shift in a half.
const GROUP: usize = 32;
/// Elements per scale.
const SUB: usize = 16;

/// Decodes the 32 elements of half `H` that share the 2-bit field `G` of their `qs` bytes. `H`
/// and `G` are const parameters so that every shift and offset is a constant.
#[inline(always)]
fn group<const H: usize, const G: usize>(b: &[u8; BYTES], y: &mut [f32; ELEMS], d: f32, dmin: f32) {
    for k in 0..GROUP / SUB {
        let base = HALF * H + GROUP * G + SUB * k;
        let s = b[SCALES + base / SUB];
        let dl = d * (s & 0xF) as f32;
        let ml = dmin * (s >> 4) as f32;
        for l in SUB * k..SUB * (k + 1) {
            let q = (b[QS + GROUP * H + l] >> (2 * G)) & 3;
            y[HALF * H + GROUP * G + l] = dl * q as f32 - ml;
        }
    }
}

/// Decodes one block: `y = (d * (s & 0xF)) * q - (dmin * (s >> 4))`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let dmin = f16_le(b, DMIN);
    const _: () = assert!(ELEMS / HALF == 2 && HALF / GROUP == 4);
    group::<0, 0>(b, y, d, dmin);
    group::<0, 1>(b, y, d, dmin);
    group::<0, 2>(b, y, d, dmin);
    group::<0, 3>(b, y, d, dmin);
    group::<1, 0>(b, y, d, dmin);
    group::<1, 1>(b, y, d, dmin);
    group::<1, 2>(b, y, d, dmin);
    group::<1, 3>(b, y, d, dmin);
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 44.32 without it, 53.19 with; on all threads 89.08 and 105.75 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scales times small integers, less f16 minimums times small
// integers: multiples of 2^-24, so zero or at least 2^-24.
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, dequant_block);

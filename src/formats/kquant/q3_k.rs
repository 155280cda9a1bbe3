//! Q3_K (ggml id 11): 256 values in 110 bytes. Spec: formats.md §4.10. GPU twin: shaders/formats/q3_k.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 110;
/// `hmask[32]`: the high (3rd) bit of each code; bit `4*half + g` of byte l.
pub const HMASK: usize = 0;
/// `qs[64]`: the low 2 bits of each code (same arrangement as Q2_K).
pub const QS: usize = 32;
/// `scales[12]`: sixteen 6-bit signed scales, packed.
pub const SCALES: usize = 96;
/// `d`: f16 super-scale.
pub const D: usize = 108;
/// Length of `scales`.
pub const SCALES_LEN: usize = 12;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::bytes("hmask", HMASK, ELEMS / 8),
    Field::bytes("qs", QS, ELEMS / 4),
    Field::bytes("scales", SCALES, SCALES_LEN),
    Field::f16("d", D),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per half (one pass over 32 `qs` bytes).
const HALF: usize = 128;
/// Elements sharing one 2-bit shift in a half.
const GROUP: usize = 32;
/// Elements per scale.
const SUB: usize = 16;
/// Number of scales.
const N_SCALES: usize = ELEMS / SUB;

/// The sixteen signed scales (-32..31) of spec §4.10.
#[inline(always)]
fn unpack_scales(b: &[u8; BYTES]) -> [i32; N_SCALES] {
    std::array::from_fn(|j| {
        let k = |i: usize| b[SCALES + i];
        let low4 = if j < 8 { k(j) & 0xF } else { k(j - 8) >> 4 };
        let high2 = (k(8 + j % 4) >> (2 * (j / 4))) & 3;
        (low4 | (high2 << 4)) as i32 - 32
    })
}

/// Decodes one block: `y = (d * S) * q` with `q = lo2 - (hbit ? 0 : 4)`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let s = unpack_scales(b);
    for half in 0..ELEMS / HALF {
        for g in 0..HALF / GROUP {
            let m = 1u8 << (4 * half + g);
            for k in 0..GROUP / SUB {
                let base = HALF * half + GROUP * g + SUB * k;
                let dl = d * s[base / SUB] as f32;
                for l in SUB * k..SUB * (k + 1) {
                    let lo2 = ((b[QS + GROUP * half + l] >> (2 * g)) & 3) as i32;
                    let q = lo2 - if b[HMASK + l] & m != 0 { 0 } else { 4 };
                    y[HALF * half + GROUP * g + l] = dl * q as f32;
                }
            }
        }
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 32.17 without it, 58.18 with; on all threads 56.74 and 102.53 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, dequant_block);

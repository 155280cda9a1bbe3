//! Q4_K (ggml id 12): 256 values in 144 bytes. Spec: formats.md §4.11. GPU twin: shaders/formats/q4_k.wgsl

use crate::formats::common::{bytes_at, dequant_row, f16_le, get_scale_min_k4};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 144;
/// `d`: f16 super-scale of the sub-block scales.
pub const D: usize = 0;
/// `dmin`: f16 super-scale of the sub-block mins.
pub const DMIN: usize = 2;
/// `scales[12]`: eight 6-bit scales and eight 6-bit mins, packed (`get_scale_min_k4`).
pub const SCALES: usize = 4;
/// `qs[128]`: 4-bit codes; each 32-byte chunk holds 64 elements (low nibbles, then high nibbles).
pub const QS: usize = 16;
/// Length of `scales` (ggml's `K_SCALE_SIZE`).
pub const SCALES_LEN: usize = 12;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::f16("dmin", DMIN),
    Field::bytes("scales", SCALES, SCALES_LEN),
    Field::bytes("qs", QS, ELEMS / 2),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per 32-byte `qs` chunk.
const CHUNK: usize = 64;
/// Elements per sub-block (one scale and min).
const SUB: usize = 32;

/// Decodes 64-element chunk `C` (sub-blocks 2C and 2C+1). `C` is a const parameter so that
/// every offset is a constant (LLVM does not unroll the chunk loop by itself).
#[inline(always)]
fn chunk<const C: usize>(
    b: &[u8; BYTES],
    y: &mut [f32; ELEMS],
    d: f32,
    dmin: f32,
    k: &[u8; SCALES_LEN],
) {
    let (sc1, m1) = get_scale_min_k4(2 * C, k);
    let (sc2, m2) = get_scale_min_k4(2 * C + 1, k);
    let d1 = d * sc1 as f32;
    let m1 = dmin * m1 as f32;
    let d2 = d * sc2 as f32;
    let m2 = dmin * m2 as f32;
    for l in 0..SUB {
        let q = b[QS + SUB * C + l];
        y[CHUNK * C + l] = d1 * (q & 0xF) as f32 - m1;
        y[CHUNK * C + SUB + l] = d2 * (q >> 4) as f32 - m2;
    }
}

/// Decodes one block: `y = (d * sc) * q - (dmin * m)`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let dmin = f16_le(b, DMIN);
    let k: [u8; SCALES_LEN] = bytes_at(b, SCALES);
    const _: () = assert!(ELEMS / CHUNK == 4);
    chunk::<0>(b, y, d, dmin, &k);
    chunk::<1>(b, y, d, dmin, &k);
    chunk::<2>(b, y, d, dmin, &k);
    chunk::<3>(b, y, d, dmin, &k);
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 52.91 without it, 67.09 with; on all threads 100.84 and 126.30 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scales times small integers, less f16 minimums times small
// integers: multiples of 2^-24, so zero or at least 2^-24.
dequant_row!(
    f32_lines = dequant_row_lines,
    f32_rows = avx512,
    no_subnormals = |_| true,
    dequant_block
);

// The f32 row for a destination off the cache line ([`crate::formats::lines`]).
crate::formats::common::line_row!(|b, out| {
    let low = _mm512_set1_epi32(0xF);
    let d = f16_le(b, D);
    let dmin = f16_le(b, DMIN);
    let k: [u8; SCALES_LEN] = bytes_at(b, SCALES);
    for c in 0..ELEMS / CHUNK {
        let qs = [0, 16].map(|h| crate::formats::lines::widen(b, QS + SUB * c + h));
        for (j, nibble) in [(2 * c, 0), (2 * c + 1, 4)] {
            let (sc, m) = get_scale_min_k4(j, &k);
            let dl = _mm512_set1_ps(d * sc as f32);
            let ml = _mm512_set1_ps(dmin * m as f32);
            for q in qs {
                let q = _mm512_and_si512(_mm512_srlv_epi32(q, _mm512_set1_epi32(nibble)), low);
                out.push(_mm512_sub_ps(_mm512_mul_ps(dl, _mm512_cvtepi32_ps(q)), ml));
            }
        }
    }
});

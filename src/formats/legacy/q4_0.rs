//! Q4_0 (ggml id 2): 32 values in 18 bytes. Spec: formats.md §4.2. GPU twin: shaders/formats/q4_0.wgsl

use crate::formats::common::{bytes_at, dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 18;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `qs[16]`: low nibbles are y[0..16], high nibbles y[16..32].
pub const QS: usize = 2;
/// Length of `qs`.
pub const QS_LEN: usize = ELEMS / 2;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::f16("d", D), Field::bytes("qs", QS, QS_LEN)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y[j] = ((qs[j] & 0xF) - 8) * d`, `y[j+16] = ((qs[j] >> 4) - 8) * d`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let qs: [u8; QS_LEN] = bytes_at(b, QS);
    // Codes as signed bytes first, so that the integer part vectorises 16 lanes wide.
    let lo = qs.map(|q| (q & 0xF) as i8 - 8);
    let hi = qs.map(|q| (q >> 4) as i8 - 8);
    for j in 0..QS_LEN {
        y[j] = lo[j] as f32 * d;
        y[j + QS_LEN] = hi[j] as f32 * d;
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 62.20 without it, 69.19 with; on all threads 114.23 and 138.73 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(
    f32_lines = dequant_row_lines,
    f32_rows = avx512,
    no_subnormals = |_| true,
    dequant_block
);

// The f32 row for a destination off the cache line ([`crate::formats::lines`]).
crate::formats::common::line_row!(|b, out| {
    let d = _mm512_set1_ps(f16_le(b, D));
    for q in crate::formats::lines::nibbles(b, QS) {
        let q = _mm512_sub_epi32(q, _mm512_set1_epi32(8));
        out.push(_mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
    }
});

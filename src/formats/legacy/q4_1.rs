//! Q4_1 (ggml id 3): 32 values in 20 bytes. Spec: formats.md §4.3. GPU twin: shaders/formats/q4_1.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 20;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `m`: f16 offset (min).
pub const M: usize = 2;
/// `qs[16]`: low nibbles are y[0..16], high nibbles y[16..32].
pub const QS: usize = 4;
/// Length of `qs`.
pub const QS_LEN: usize = ELEMS / 2;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::f16("m", M),
    Field::bytes("qs", QS, QS_LEN),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y = q * d + m`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let m = f16_le(b, M);
    for j in 0..QS_LEN {
        let q = b[QS + j];
        y[j] = (q & 0xF) as f32 * d + m;
        y[j + QS_LEN] = (q >> 4) as f32 * d + m;
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 45.06 without it, 49.94 with; on all threads 89.39 and 94.73 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer plus an f16 minimum:
// multiples of 2^-24, so zero or at least 2^-24.
dequant_row!(
    f32_lines = dequant_row_lines,
    f32_rows = avx512,
    no_subnormals = |_| true,
    dequant_block
);

// The f32 row for a destination off the cache line ([`crate::formats::lines`]).
crate::formats::common::line_row!(|b, out| {
    let d = _mm512_set1_ps(f16_le(b, D));
    let m = _mm512_set1_ps(f16_le(b, M));
    for q in crate::formats::lines::nibbles(b, QS) {
        let qd = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
        out.push(crate::formats::lines::add_first(qd, m));
    }
});

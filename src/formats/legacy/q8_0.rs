//! Q8_0 (ggml id 8): 32 values in 34 bytes. Spec: formats.md §4.6. GPU twin: shaders/formats/q8_0.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 34;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `qs[32]`: int8 codes, one per element.
pub const QS: usize = 2;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::f16("d", D), Field::bytes("qs", QS, ELEMS)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y[j] = int8(qs[j]) * d`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for j in 0..ELEMS {
        y[j] = b[QS + j] as i8 as f32 * d;
    }
}

// The f32 row without the AVX-512 clone: f32 GB/s on one thread 65.82 without it, 59.38 with; on
// all threads 132.03 and 98.75 (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(
    f32_lines = dequant_row_lines,
    no_subnormals = |_| true,
    dequant_block
);

// The f32 row for a destination off the cache line ([`crate::formats::lines`]).
crate::formats::common::line_row!(|b, out| {
    let d = _mm512_set1_ps(f16_le(b, D));
    for half in 0..2 {
        let qs: __m128i = bytemuck::cast(crate::formats::common::bytes_at::<16>(b, QS + 16 * half));
        out.push(_mm512_mul_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qs)),
            d,
        ));
    }
});

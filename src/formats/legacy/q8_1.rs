//! Q8_1 (ggml id 9): 32 values in 36 bytes. Spec: formats.md §4.7. GPU twin: shaders/formats/q8_1.wgsl
//!
//! ggml has no `to_float` for this activation format; the natural decode `int8(qs[j]) * d` is used
//! and `s` (d × Σ qs, redundant) is ignored.

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 36;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `s`: f16 `d * sum(qs)`, ignored by the decode.
pub const S: usize = 2;
/// `qs[32]`: int8 codes, one per element.
pub const QS: usize = 4;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::f16("s", S),
    Field::bytes("qs", QS, ELEMS),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y[j] = int8(qs[j]) * d`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for j in 0..ELEMS {
        y[j] = b[QS + j] as i8 as f32 * d;
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 64.11 without it, 68.51 with; on all threads 121.03 and 134.40 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, dequant_block);

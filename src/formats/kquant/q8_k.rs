//! Q8_K (ggml id 15): 256 values in 292 bytes. Spec: formats.md §4.8. GPU twin: shaders/formats/q8_k.wgsl
//!
//! ggml's activation format for k-quant dot products (not in `type_traits`); decoded as
//! `dequantize_row_q8_K` does, `y = d * int8(qs)`. `bsums` is redundant and ignored.

use crate::formats::common::{dequant_row, f32_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 292;
/// `d`: **f32** scale.
pub const D: usize = 0;
/// `qs[256]`: int8 codes, one per element.
pub const QS: usize = 4;
/// `bsums`: `int16[16]`, the sum of each group of 16 `qs` (ignored).
pub const BSUMS: usize = 260;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f32("d", D),
    Field::bytes("qs", QS, ELEMS),
    Field::bytes("bsums", BSUMS, ELEMS / 16 * 2),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y[i] = d * int8(qs[i])`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f32_le(b, D);
    for i in 0..ELEMS {
        y[i] = d * b[QS + i] as i8 as f32;
    }
}

// `no_subnormals`: each value is `d` times an integer, normal (or infinite, or zero) where `d` is
// normal.
dequant_row!(no_subnormals = |b| f32_le(b, D).is_normal(), dequant_block);

//! F32 (ggml id 0): 1 value in 4 bytes. Spec: formats.md §4.1. GPU twin: shaders/formats/f32.wgsl
//!
//! One-element types have no named fields: the block is the value (`FIELDS` is empty).

use crate::formats::common::dequant_row;
use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 1;
/// Bytes per block.
pub const BYTES: usize = 4;
/// Block layout: none, the block is one little-endian IEEE binary32.
pub const FIELDS: &[Field] = &[];
const _: () = assert!(FIELDS.is_empty() && ELEMS == 1);

/// Decodes one value, bits unchanged.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    y[0] = f32::from_le_bytes(*b);
}

dequant_row!(|src, dst| {
    let (blocks, _) = src.as_chunks::<BYTES>();
    for (b, y) in blocks.iter().zip(dst.iter_mut()) {
        *y = f32::from_le_bytes(*b);
    }
});

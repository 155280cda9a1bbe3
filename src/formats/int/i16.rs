//! I16 (ggml id 25): 1 value in 2 bytes. Spec: formats.md §4.1. CPU only (`cpu_only` in the registry: no shader)
//!
//! A two's-complement little-endian integer, converted to the nearest f32 (ties to even, `as f32`).

use crate::formats::common::dequant_row;
use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 1;
/// Bytes per block.
pub const BYTES: usize = 2;
/// Block layout: none, the block is one little-endian i16.
pub const FIELDS: &[Field] = &[];
const _: () = assert!(FIELDS.is_empty() && ELEMS == 1);

/// Decodes one value.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    y[0] = i16::from_le_bytes(*b) as f32;
}

// `no_subnormals`: each value is an integer.
dequant_row!(no_subnormals = |_| true, |src, dst| {
    let (blocks, _) = src.as_chunks::<BYTES>();
    for (b, y) in blocks.iter().zip(dst.iter_mut()) {
        *y = i16::from_le_bytes(*b) as f32;
    }
});

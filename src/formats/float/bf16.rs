//! BF16 (ggml id 30): 1 value in 2 bytes. Spec: formats.md §2.2. GPU twin: shaders/formats/bf16.wgsl

use crate::formats::common::{bf16_le, dequant_row};
use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 1;
/// Bytes per block.
pub const BYTES: usize = 2;
/// Block layout: none, the block is one little-endian bfloat16.
pub const FIELDS: &[Field] = &[];
const _: () = assert!(FIELDS.is_empty() && ELEMS == 1);

/// Decodes one value: f32 bits = bf16 bits << 16 (exact; NaN and Inf pass through).
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    y[0] = bf16_le(b, 0);
}

dequant_row!(|src, dst| {
    let (blocks, _) = src.as_chunks::<BYTES>();
    for (b, y) in blocks.iter().zip(dst.iter_mut()) {
        // Same as `bf16_le`, written as a shift so that the loop vectorises.
        *y = f32::from_bits((u16::from_le_bytes(*b) as u32) << 16);
    }
});

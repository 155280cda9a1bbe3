//! Q4_1 (ggml id 3): 32 values in 20 bytes.

use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 20;
/// Block layout.
pub const FIELDS: &[Field] = &[];

/// Decodes whole blocks of `src` into `dst` (`dst.len() == src.len() / BYTES * ELEMS`).
pub fn dequant_row(src: &[u8], dst: &mut [f32]) {
    let _ = src;
    dst.fill(f32::NAN);
}

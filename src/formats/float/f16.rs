//! F16 (ggml id 1): 1 value in 2 bytes. Spec: formats.md §2.1. GPU twin: shaders/formats/f16.wgsl

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::formats::common::f16_le;
use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 1;
/// Bytes per block.
pub const BYTES: usize = 2;
/// Block layout: none, the block is one little-endian IEEE binary16.
pub const FIELDS: &[Field] = &[];
const _: () = assert!(FIELDS.is_empty() && ELEMS == 1);

/// Values converted per batch through a stack buffer (half's slice conversion uses F16C when the
/// CPU has it).
const BATCH: usize = 512;

/// Decodes one value, exact including subnormals.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    y[0] = f16_le(b, 0);
}

/// Decodes whole blocks of `src` into `dst` (`dst.len() == src.len() / BYTES * ELEMS`).
pub fn dequant_row(src: &[u8], dst: &mut [f32]) {
    let (blocks, _) = src.as_chunks::<BYTES>();
    let mut buf = [f16::ZERO; BATCH];
    for (bs, ys) in blocks.chunks(BATCH).zip(dst.chunks_mut(BATCH)) {
        let n = bs.len().min(ys.len());
        let h = &mut buf[..n];
        for (x, b) in h.iter_mut().zip(bs) {
            *x = f16::from_bits(u16::from_le_bytes(*b));
        }
        h.convert_to_f32_slice(&mut ys[..n]);
    }
}

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

/// Values the half rows round at a time: one AVX-512 `vcvtps2ph`.
const HALF_VECTOR: usize = 16;

// The half rows round straight from `src`, with no copy of the values in between.
dequant_row!(
    |src, dst| {
        let (blocks, _) = src.as_chunks::<BYTES>();
        for (b, y) in blocks.iter().zip(dst.iter_mut()) {
            *y = f32::from_le_bytes(*b);
        }
    },
    half = |src, dst, to_half| {
        let (vectors, tail) = src.as_chunks::<{ HALF_VECTOR * BYTES }>();
        let (outs, out_tail) = dst.as_chunks_mut::<HALF_VECTOR>();
        let values = |b: &[u8]| -> [f32; HALF_VECTOR] {
            let mut y = [0.0; HALF_VECTOR];
            for (y, b) in y.iter_mut().zip(b.as_chunks::<BYTES>().0) {
                *y = f32::from_le_bytes(*b);
            }
            y
        };
        for (b, o) in vectors.iter().zip(outs.iter_mut()) {
            // As in `dequant_blocks`: vectorise within a vector's values, not across vectors.
            std::hint::black_box(());
            to_half(&values(b), o);
        }
        to_half(&values(tail)[..out_tail.len()], out_tail);
    }
);

//! F16 (ggml id 1): 1 value in 2 bytes. Spec: formats.md §2.1. GPU twin: shaders/formats/f16.wgsl

use crate::formats::common::{dequant_row, f16_bits, f16_le};
use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 1;
/// Bytes per block.
pub const BYTES: usize = 2;
/// Block layout: none, the block is one little-endian IEEE binary16.
pub const FIELDS: &[Field] = &[];
const _: () = assert!(FIELDS.is_empty() && ELEMS == 1);

/// Decodes one value, exact including subnormals.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    y[0] = f16_le(b, 0);
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 33.02 without it, 50.23 with; on all threads 66.30 and 100.37 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is an f16 (whose subnormals, at least 2^-24, are normal f32 values).
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, |src, dst| {
    let (blocks, _) = src.as_chunks::<BYTES>();
    for (b, y) in blocks.iter().zip(dst.iter_mut()) {
        *y = f16_bits(u16::from_le_bytes(*b));
    }
});

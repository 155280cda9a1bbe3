//! I64 (ggml id 27): 1 value in 8 bytes. Spec: formats.md §4.1. CPU only (`cpu_only` in the registry: no shader)
//!
//! A two's-complement little-endian integer, converted to the nearest f32 (ties to even, `as f32`).

use crate::formats::common::dequant_row;
use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 1;
/// Bytes per block.
pub const BYTES: usize = 8;
/// Block layout: none, the block is one little-endian i64.
pub const FIELDS: &[Field] = &[];
const _: () = assert!(FIELDS.is_empty() && ELEMS == 1);

/// Decodes one value.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    y[0] = i64::from_le_bytes(*b) as f32;
}

// The f32 row without the AVX-512 clone, though it is faster with it (f32 GB/s on one thread 14.84
// without, 19.97 with): the half rows would then run at 0.84 of it (AMD EPYC Zen 5,
// examples/cpu_throughput).
//
// The half-precision rows without the AVX-512 clone of the decode, which LLVM vectorises worse here
// (the rounding still runs at the CPU's widest, out of line): f16/bf16 values per second over f32's
// on one thread 0.76/0.74 with it, 1.09/1.10 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an integer.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, |src, dst| {
    let (blocks, _) = src.as_chunks::<BYTES>();
    for (b, y) in blocks.iter().zip(dst.iter_mut()) {
        *y = i64::from_le_bytes(*b) as f32;
    }
});

//! F8_E4M3 (ggml id 43, fork-only): 1 value in 1 byte. Spec: formats.md §2.6, §5.
//! GPU twin: shaders/formats/f8_e4m3.wgsl
//!
//! Decoded as OCP E4M3FN: sign bit 7, bias 7, subnormals at exponent 0, 0x7F / 0xFF are NaN.

use crate::formats::common::{dequant_row, e4m3_to_f32};
use crate::formats::field::Field;

/// Elements per block.
pub const ELEMS: usize = 1;
/// Bytes per block.
pub const BYTES: usize = 1;
/// Block layout: none, the block is one E4M3 code.
pub const FIELDS: &[Field] = &[];
const _: () = assert!(FIELDS.is_empty() && ELEMS == 1);

/// All 256 codes, decoded at compile time by [`e4m3_to_f32`].
const LUT: [f32; 256] = {
    let mut t = [0.0f32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = e4m3_to_f32(i as u8);
        i += 1;
    }
    t
};

/// Decodes one value.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    y[0] = LUT[b[0] as usize];
}

// The half-precision rows without the AVX-512 clone, whose decode LLVM vectorises worse here:
// f16/bf16 values per second over f32's on one thread 0.63/0.60 with it, 0.75/0.60 without (AMD EPYC
// Zen 5, scripts/bench_vs_ggml.py).
dequant_row!(half_rows = avx2, |src, dst| {
    for (&b, y) in src.iter().zip(dst.iter_mut()) {
        *y = LUT[b as usize];
    }
});

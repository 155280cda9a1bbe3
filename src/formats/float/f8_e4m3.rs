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

// The half rows round the 256 values of the table once per call and look each code up in the
// result (the rounding of the very value the f32 row writes), instead of rounding every value:
// f16/bf16 values per second over f32's on one thread 0.75/0.60 that way, 1.04/1.04 this way; in
// the AVX-512 clone, whose lookups became 16-lane gathers, 0.69/0.70 (AMD EPYC Zen 5,
// examples/cpu_throughput).
dequant_row!(
    half_rows = avx2,
    |src, dst| {
        for (&b, y) in src.iter().zip(dst.iter_mut()) {
            *y = LUT[b as usize];
        }
    },
    half = |src, dst, to_half| {
        let mut halves = [[0; 2]; 256];
        to_half(&LUT, &mut halves);
        // 32-bit entries: loads as wide as the f32 row's.
        let table = halves.map(|h| u16::from_le_bytes(h) as u32);
        for (&b, o) in src.iter().zip(dst.iter_mut()) {
            *o = (table[b as usize] as u16).to_le_bytes();
        }
    }
);

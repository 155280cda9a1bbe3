//! Q2_0 (ggml id 42): 64 values in 18 bytes. Spec: formats.md §4.28. GPU twin: shaders/formats/q2_0.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 64;
/// Bytes per block.
pub const BYTES: usize = 18;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `qs[16]`: 2-bit codes, 4 consecutive elements per byte, LSB first.
pub const QS: usize = 2;
/// Elements per `qs` byte.
const PER_BYTE: usize = 4;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::f16("d", D), Field::bytes("qs", QS, ELEMS / PER_BYTE)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y[j] = (q - 1) * d`, codes 0..3 giving -d, 0, d, 2d.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for j in 0..ELEMS {
        let q = (b[QS + j / PER_BYTE] >> (2 * (j % PER_BYTE))) & 3;
        y[j] = (q as i32 - 1) as f32 * d;
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 12.98 without it, 25.04 with; on all threads 25.39 and 48.37 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, dequant_block);

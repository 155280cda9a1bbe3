//! Q5_0 (ggml id 6): 32 values in 22 bytes. Spec: formats.md §4.4. GPU twin: shaders/formats/q5_0.wgsl

use crate::formats::common::{dequant_row, f16_le, u32_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 22;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `qh`: u32 LE, bit k is the 5th bit of element k.
pub const QH: usize = 2;
/// `qs[16]`: low 4 bits; low nibbles are y[0..16], high nibbles y[16..32].
pub const QS: usize = 6;
/// Length of `qs`.
pub const QS_LEN: usize = ELEMS / 2;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::uint("qh", QH, 4),
    Field::bytes("qs", QS, QS_LEN),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y = (q5 - 16) * d`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let qh = u32_le(b, QH);
    for j in 0..QS_LEN {
        let q = b[QS + j] as u32;
        let lo = (q & 0xF) | (((qh >> j) & 1) << 4);
        let hi = (q >> 4) | (((qh >> (j + QS_LEN)) & 1) << 4);
        y[j] = (lo as i32 - 16) as f32 * d;
        y[j + QS_LEN] = (hi as i32 - 16) as f32 * d;
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 51.51 without it, 69.47 with; on all threads 99.89 and 131.97 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, dequant_block);

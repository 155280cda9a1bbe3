//! Q5_1 (ggml id 7): 32 values in 24 bytes. Spec: formats.md §4.5. GPU twin: shaders/formats/q5_1.wgsl

use crate::formats::common::{dequant_row, f16_le, u32_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 24;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `m`: f16 offset (min).
pub const M: usize = 2;
/// `qh`: u32 LE, bit k is the 5th bit of element k.
pub const QH: usize = 4;
/// `qs[16]`: low 4 bits; low nibbles are y[0..16], high nibbles y[16..32].
pub const QS: usize = 8;
/// Length of `qs`.
pub const QS_LEN: usize = ELEMS / 2;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::f16("m", M),
    Field::uint("qh", QH, 4),
    Field::bytes("qs", QS, QS_LEN),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y = q5 * d + m`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let m = f16_le(b, M);
    let qh = u32_le(b, QH);
    for j in 0..QS_LEN {
        let q = b[QS + j] as u32;
        let lo = (q & 0xF) | (((qh >> j) & 1) << 4);
        let hi = (q >> 4) | (((qh >> (j + QS_LEN)) & 1) << 4);
        y[j] = lo as f32 * d + m;
        y[j + QS_LEN] = hi as f32 * d + m;
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 44.65 without it, 48.16 with; on all threads 84.80 and 92.06 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer plus an f16 minimum:
// multiples of 2^-24, so zero or at least 2^-24.
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, dequant_block);

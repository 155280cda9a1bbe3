//! Q6_K (ggml id 14): 256 values in 210 bytes. Spec: formats.md §4.13. GPU twin: shaders/formats/q6_k.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 210;
/// `ql[128]`: low 4 bits of each code.
pub const QL: usize = 0;
/// `qh[64]`: high 2 bits of each code.
pub const QH: usize = 128;
/// `scales`: `int8[16]`, one signed scale per 16 elements.
pub const SCALES: usize = 192;
/// `d`: f16 super-scale.
pub const D: usize = 208;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::bytes("ql", QL, ELEMS / 2),
    Field::bytes("qh", QH, ELEMS / 4),
    Field::bytes("scales", SCALES, ELEMS / 16),
    Field::f16("d", D),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per half (64 `ql` bytes, 32 `qh` bytes, 8 scales).
const HALF: usize = 128;
/// Elements per quarter of a half.
const QUAD: usize = 32;
/// Elements per scale.
const SUB: usize = 16;

/// Decodes one block: `y = (d * sc) * q` with `q = (lo4 | hi2 << 4) - 32`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for half in 0..ELEMS / HALF {
        let ql = QL + (HALF / 2) * half;
        let qh = QH + (HALF / 4) * half;
        let sc = SCALES + (HALF / SUB) * half;
        for k in 0..QUAD / SUB {
            let dl: [f32; 4] = std::array::from_fn(|quad| d * b[sc + 2 * quad + k] as i8 as f32);
            for l in SUB * k..SUB * (k + 1) {
                let h = b[qh + l];
                let q1 = ((b[ql + l] & 0xF) | ((h & 3) << 4)) as i32 - 32;
                let q2 = ((b[ql + l + QUAD] & 0xF) | (((h >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((b[ql + l] >> 4) | (((h >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((b[ql + l + QUAD] >> 4) | (((h >> 6) & 3) << 4)) as i32 - 32;
                let o = HALF * half + l;
                y[o] = dl[0] * q1 as f32;
                y[o + QUAD] = dl[1] * q2 as f32;
                y[o + 2 * QUAD] = dl[2] * q3 as f32;
                y[o + 3 * QUAD] = dl[3] * q4 as f32;
            }
        }
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 41.16 without it, 63.76 with; on all threads 76.56 and 125.48 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, dequant_block);

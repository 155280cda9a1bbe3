//! IQ3_S (ggml id 21): 256 values in 110 bytes. Spec: formats.md §4.18. GPU twin: shaders/formats/iq3_s.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::IQ3S_GRID;

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 110;
/// `d`: f16 super-scale.
pub const D: usize = 0;
/// `qs[64]`: low 8 bits of the 9-bit grid indices.
pub const QS: usize = 2;
/// `qh[8]`: 9th index bits, one byte per sub-block.
pub const QH: usize = 66;
/// `signs[32]`: explicit 8-bit sign masks.
pub const SIGNS: usize = 74;
/// `scales[4]`: two 4-bit scales per byte.
pub const SCALES: usize = 106;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::bytes("qs", QS, ELEMS / 4),
    Field::bytes("qh", QH, ELEMS / 32),
    Field::bytes("signs", SIGNS, ELEMS / 8),
    Field::bytes("scales", SCALES, ELEMS / 64),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per sub-block.
const SUB: usize = 32;
/// Elements per sign mask (two grid entries of 4).
const GROUP: usize = 8;
/// Elements per grid entry.
const HALF_GROUP: usize = 4;

/// Decodes one block: `y = (db * g[j]) * ±1` with `db = d * (1 + 2*sc)`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for ib in 0..ELEMS / SUB {
        let sc = (b[SCALES + ib / 2] >> (4 * (ib % 2))) & 0xF;
        let db = d * (1 + 2 * sc as i32) as f32;
        let qh = b[QH + ib] as usize;
        for l in 0..SUB / GROUP {
            let i0 = b[QS + 8 * ib + 2 * l] as usize | (((qh >> (2 * l)) & 1) << 8);
            let i1 = b[QS + 8 * ib + 2 * l + 1] as usize | (((qh >> (2 * l + 1)) & 1) << 8);
            let g1 = IQ3S_GRID[i0 & 511].to_le_bytes();
            let g2 = IQ3S_GRID[i1 & 511].to_le_bytes();
            let signs = b[SIGNS + 4 * ib + l];
            for j in 0..GROUP {
                let g = if j < HALF_GROUP {
                    g1[j]
                } else {
                    g2[j - HALF_GROUP]
                };
                let s = if (signs >> j) & 1 != 0 { -1.0 } else { 1.0 };
                y[SUB * ib + GROUP * l + j] = (db * g as f32) * s;
            }
        }
    }
}

// The half-precision rows without the AVX-512 clone of the decode, which LLVM vectorises worse here
// (the rounding still runs at the CPU's widest, out of line): f16/bf16 values per second over f32's
// on one thread 0.80/0.82 with it, 0.90/0.86 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

//! IQ3_XXS (ggml id 18): 256 values in 98 bytes. Spec: formats.md §4.17. GPU twin: shaders/formats/iq3_xxs.wgsl

use crate::formats::common::{dequant_row, f16_le, u32_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::{IQ3XXS_GRID, KSIGNS_IQ2XS};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 98;
/// `d`: f16 super-scale.
pub const D: usize = 0;
/// `qs[0..64]`: 8-bit grid indices, 8 per sub-block.
pub const QS: usize = 2;
/// `qs[64..96]` (ggml's `scales_and_signs`): u32 LE per sub-block = four 7-bit sign indices and a
/// 4-bit scale in bits 28..32.
pub const SCALES_AND_SIGNS: usize = 66;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::bytes("qs", QS, ELEMS / 4),
    Field::bytes("scales_and_signs", SCALES_AND_SIGNS, ELEMS / 8),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per sub-block.
const SUB: usize = 32;
/// Elements per sign index (two grid entries of 4).
const GROUP: usize = 8;
/// Elements per grid entry.
const HALF_GROUP: usize = 4;

/// Decodes one block: `y = (db * g[j]) * ±1` with `db = (d * (0.5 + ls)) * 0.5`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for ib in 0..ELEMS / SUB {
        let aux = u32_le(b, SCALES_AND_SIGNS + 4 * ib);
        let db = (d * (0.5 + (aux >> 28) as f32)) * 0.5;
        for l in 0..SUB / GROUP {
            let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
            let g1 = IQ3XXS_GRID[b[QS + 8 * ib + 2 * l] as usize].to_le_bytes();
            let g2 = IQ3XXS_GRID[b[QS + 8 * ib + 2 * l + 1] as usize].to_le_bytes();
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
// on one thread 0.62/0.60 with it, 0.92/0.88 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

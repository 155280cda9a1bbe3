//! IQ2_S (ggml id 22): 256 values in 82 bytes. Spec: formats.md §4.16. GPU twin: shaders/formats/iq2_s.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::IQ2S_GRID;

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 82;
/// `d`: f16 super-scale.
pub const D: usize = 0;
/// `qs[0..32]`: low 8 bits of the 10-bit grid indices (ggml's `qs[64]` is this plus `SIGNS`).
pub const QS: usize = 2;
/// `qs[32..64]`: explicit 8-bit sign masks, one per 8-element group.
pub const SIGNS: usize = 34;
/// `qh[8]`: high 2 bits of the grid indices, one byte per sub-block.
pub const QH: usize = 66;
/// `scales[8]`: two 4-bit scales per sub-block.
pub const SCALES: usize = 74;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::bytes("qs", QS, ELEMS / 8),
    Field::bytes("signs", SIGNS, ELEMS / 8),
    Field::bytes("qh", QH, ELEMS / 32),
    Field::bytes("scales", SCALES, ELEMS / 32),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per sub-block.
const SUB: usize = 32;
/// Elements per grid entry.
const GROUP: usize = 8;

/// Decodes one block: `y = (db * g[j]) * ±1` with `db = (d * (0.5 + nib)) * 0.25`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for ib in 0..ELEMS / SUB {
        let sc = b[SCALES + ib];
        let db = [
            (d * (0.5 + (sc & 0xF) as f32)) * 0.25,
            (d * (0.5 + (sc >> 4) as f32)) * 0.25,
        ];
        let qh = b[QH + ib] as usize;
        for l in 0..SUB / GROUP {
            let idx = b[QS + 4 * ib + l] as usize | (((qh >> (2 * l)) & 3) << 8);
            let grid = IQ2S_GRID[idx & 1023].to_le_bytes();
            let signs = b[SIGNS + 4 * ib + l];
            let dl = db[l / 2];
            for j in 0..GROUP {
                let s = if (signs >> j) & 1 != 0 { -1.0 } else { 1.0 };
                y[SUB * ib + GROUP * l + j] = (dl * grid[j] as f32) * s;
            }
        }
    }
}

// The half-precision rows without the AVX-512 clone of the decode, which LLVM vectorises worse here
// (the rounding still runs at the CPU's widest, out of line): f16/bf16 values per second over f32's
// on one thread 0.68/0.64 with it, 0.92/0.87 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

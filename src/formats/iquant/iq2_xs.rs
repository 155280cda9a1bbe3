//! IQ2_XS (ggml id 17): 256 values in 74 bytes. Spec: formats.md §4.15. GPU twin: shaders/formats/iq2_xs.wgsl

use crate::formats::common::{dequant_row, f16_le, u16_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::{IQ2XS_GRID, KSIGNS_IQ2XS};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 74;
/// `d`: f16 super-scale.
pub const D: usize = 0;
/// `qs`: `u16[32]` LE, one per 8-element group: 9-bit grid index, 7-bit sign index.
pub const QS: usize = 2;
/// `scales[8]`: two 4-bit scales per 32-element sub-block (groups 0,1 low; 2,3 high).
pub const SCALES: usize = 66;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::bytes("qs", QS, ELEMS / 4),
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
        for l in 0..SUB / GROUP {
            let v = u16_le(b, QS + 2 * (4 * ib + l));
            let grid = IQ2XS_GRID[(v & 511) as usize].to_le_bytes();
            let signs = KSIGNS_IQ2XS[(v >> 9) as usize & 127];
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
// on one thread 0.80/0.76 with it, 0.95/0.91 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

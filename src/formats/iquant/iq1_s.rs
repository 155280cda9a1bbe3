//! IQ1_S (ggml id 19): 256 values in 50 bytes. Spec: formats.md §4.19. GPU twin: shaders/formats/iq1_s.wgsl

use crate::formats::common::{dequant_row, f16_le, u16_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::IQ1S_GRID;

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 50;
/// `d`: f16 super-scale.
pub const D: usize = 0;
/// `qs[32]`: low 8 bits of the 11-bit grid indices.
pub const QS: usize = 2;
/// `qh`: `u16[8]` LE per sub-block: four 3-bit index extensions, 3-bit scale, delta sign (bit 15).
pub const QH: usize = 34;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::bytes("qs", QS, ELEMS / 8),
    Field::bytes("qh", QH, ELEMS / 16),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// ggml's `IQ1S_DELTA`.
pub const IQ1S_DELTA: f32 = 0.125;
/// Elements per sub-block.
const SUB: usize = 32;
/// Elements per grid entry.
const GROUP: usize = 8;

/// Decodes one block: `y = dl * (g[j] + delta)` with `dl = d * (2*s + 1)`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for ib in 0..ELEMS / SUB {
        let h = u16_le(b, QH + 2 * ib) as usize;
        let dl = d * (2 * ((h >> 12) & 7) + 1) as f32;
        let delta = if h & 0x8000 != 0 {
            -IQ1S_DELTA
        } else {
            IQ1S_DELTA
        };
        for l in 0..SUB / GROUP {
            let idx = b[QS + 4 * ib + l] as usize | (((h >> (3 * l)) & 7) << 8);
            let grid = IQ1S_GRID[idx & 2047].to_le_bytes();
            for j in 0..GROUP {
                y[SUB * ib + GROUP * l + j] = dl * (grid[j] as i8 as f32 + delta);
            }
        }
    }
}

// The half-precision rows without the AVX-512 clone of the decode, which LLVM vectorises worse here
// (the rounding still runs at the CPU's widest, out of line): f16/bf16 values per second over f32's
// on one thread 0.65/0.60 with it, 0.91/0.88 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

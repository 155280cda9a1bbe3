//! IQ1_M (ggml id 29): 256 values in 56 bytes. Spec: formats.md §4.20. GPU twin: shaders/formats/iq1_m.wgsl

use crate::formats::common::{dequant_row, f16_bits, u16_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::IQ1S_GRID;

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 56;
/// `qs[32]`: low 8 bits of the 11-bit grid indices.
pub const QS: usize = 0;
/// `qh[16]`: one nibble per 8-element group: 3 index bits and the delta sign (bit 3).
pub const QH: usize = 32;
/// `scales`: 4 × u16 LE; low 12 bits hold four 3-bit scales, the top nibbles the f16 super-scale.
pub const SCALES: usize = 48;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::bytes("qs", QS, ELEMS / 8),
    Field::bytes("qh", QH, ELEMS / 16),
    Field::bytes("scales", SCALES, ELEMS / 32),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// ggml's `IQ1M_DELTA`.
pub const IQ1M_DELTA: f32 = 0.125;
/// Elements per sub-block.
const SUB: usize = 32;
/// Elements per grid entry.
const GROUP: usize = 8;

/// Decodes one block: `y = dl * (g[j] + delta)` with `dl = d * (2*s + 1)`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let sc: [u16; 4] = std::array::from_fn(|k| u16_le(b, SCALES + 2 * k));
    let dbits =
        (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000);
    let d = f16_bits(dbits);
    for ib in 0..ELEMS / SUB {
        let w = (sc[ib / 2] >> (6 * (ib % 2))) as usize;
        let dl = [
            d * (2 * (w & 7) + 1) as f32,
            d * (2 * ((w >> 3) & 7) + 1) as f32,
        ];
        for l in 0..SUB / GROUP {
            let hb = (b[QH + 2 * ib + l / 2] >> (4 * (l % 2))) as usize;
            let idx = b[QS + 4 * ib + l] as usize | ((hb & 7) << 8);
            let delta = if hb & 8 != 0 { -IQ1M_DELTA } else { IQ1M_DELTA };
            let grid = IQ1S_GRID[idx & 2047].to_le_bytes();
            for j in 0..GROUP {
                y[SUB * ib + GROUP * l + j] = dl[l / 2] * (grid[j] as i8 as f32 + delta);
            }
        }
    }
}

// The half-precision rows without the AVX-512 clone of the decode, which LLVM vectorises worse here
// (the rounding still runs at the CPU's widest, out of line): f16/bf16 values per second over f32's
// on all threads 0.79–0.84 with it, 0.94–0.95 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

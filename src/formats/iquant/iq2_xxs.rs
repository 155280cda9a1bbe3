//! IQ2_XXS (ggml id 16): 256 values in 66 bytes. Spec: formats.md §4.14. GPU twin: shaders/formats/iq2_xxs.wgsl

use crate::formats::common::{dequant_row, f16_le, u32_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::{IQ2XXS_GRID, KSIGNS_IQ2XS};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 66;
/// `d`: f16 super-scale.
pub const D: usize = 0;
/// `qs` (declared `u16[32]`): per 32-element sub-block, 8 bytes = four 8-bit grid indices, then a
/// u32 LE holding four 7-bit sign indices (bits 0..28) and a 4-bit scale (bits 28..32).
pub const QS: usize = 2;
/// Bytes of `qs` per sub-block.
pub const QS_PER_SUB: usize = 8;
/// Offset of the sign/scale u32 within a sub-block's `qs` bytes.
pub const AUX: usize = 4;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::f16("d", D), Field::bytes("qs", QS, ELEMS / 4)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per sub-block.
const SUB: usize = 32;
/// Elements per grid entry.
const GROUP: usize = 8;

/// Decodes one block: `y = (db * g[j]) * ±1` with `db = (d * (0.5 + ls)) * 0.25`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for ib in 0..ELEMS / SUB {
        let base = QS + QS_PER_SUB * ib;
        let aux = u32_le(b, base + AUX);
        let db = (d * (0.5 + (aux >> 28) as f32)) * 0.25;
        for l in 0..SUB / GROUP {
            let grid = IQ2XXS_GRID[b[base + l] as usize].to_le_bytes();
            let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
            for j in 0..GROUP {
                let s = if (signs >> j) & 1 != 0 { -1.0 } else { 1.0 };
                y[SUB * ib + GROUP * l + j] = (db * grid[j] as f32) * s;
            }
        }
    }
}

// The half-precision rows without the AVX-512 clone of the decode, which LLVM vectorises worse here
// (the rounding still runs at the CPU's widest, out of line): f16/bf16 values per second over f32's
// on one thread 0.66/0.65 with it, 0.92/0.88 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

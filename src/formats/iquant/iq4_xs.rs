//! IQ4_XS (ggml id 23): 256 values in 136 bytes. Spec: formats.md §4.22. GPU twin: shaders/formats/iq4_xs.wgsl

use crate::formats::common::{dequant_row, f16_le, u16_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::KVALUES_IQ4NL;

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 136;
/// `d`: f16 super-scale.
pub const D: usize = 0;
/// `scales_h`: u16 LE, high 2 bits of the eight 6-bit scales.
pub const SCALES_H: usize = 2;
/// `scales_l[4]`: low 4 bits of the scales, two per byte.
pub const SCALES_L: usize = 4;
/// `qs[128]`: 4-bit codes, 16 bytes per sub-block (low nibbles first 16 elements).
pub const QS: usize = 8;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::uint("scales_h", SCALES_H, 2),
    Field::bytes("scales_l", SCALES_L, ELEMS / 64),
    Field::bytes("qs", QS, ELEMS / 2),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per sub-block.
const SUB: usize = 32;
/// Half a sub-block: the low- or high-nibble elements.
const HALF_SUB: usize = 16;

/// Decodes one block: `y = (d * (ls - 32)) * kvalues_iq4nl[code]`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let scales_h = u16_le(b, SCALES_H) as i32;
    for ib in 0..ELEMS / SUB {
        let lo = ((b[SCALES_L + ib / 2] >> (4 * (ib % 2))) & 0xF) as i32;
        let ls = lo | (((scales_h >> (2 * ib)) & 3) << 4);
        let dl = d * (ls - 32) as f32;
        for j in 0..HALF_SUB {
            let q = b[QS + HALF_SUB * ib + j];
            y[SUB * ib + j] = dl * KVALUES_IQ4NL[(q & 0xF) as usize] as f32;
            y[SUB * ib + HALF_SUB + j] = dl * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
        }
    }
}

// The half-precision rows without the AVX-512 clone of the decode, which LLVM vectorises worse here
// (the rounding still runs at the CPU's widest, out of line): f16/bf16 values per second over f32's
// on one thread 0.31/0.29 with it, 0.92/0.90 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

//! NVFP4 (ggml id 40): 64 values in 36 bytes. Spec: formats.md §4.26. GPU twin: shaders/formats/nvfp4.wgsl

use crate::formats::common::{dequant_row, ue4m3_half};
use crate::formats::field::{self, Field};
use crate::formats::tables::KVALUES_FP4;

/// Elements per block.
pub const ELEMS: usize = 64;
/// Bytes per block.
pub const BYTES: usize = 36;
/// `d[4]`: one UE4M3 scale per 16-element sub-block (decoded halved, `ue4m3_half`).
pub const D: usize = 0;
/// `qs[32]`: E2M1 codes, 8 bytes per sub-block (low nibbles first 8 elements, high nibbles next 8).
pub const QS: usize = 4;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::bytes("d", D, ELEMS / SUB),
    Field::bytes("qs", QS, ELEMS / 2),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per sub-block.
const SUB: usize = 16;
/// `qs` bytes per sub-block.
const QS_PER_SUB: usize = SUB / 2;

/// Decodes one block: `y = kvalues_fp4[code] * ue4m3_half(d[s])`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    for s in 0..ELEMS / SUB {
        let d = ue4m3_half(b[D + s]);
        for j in 0..QS_PER_SUB {
            let q = b[QS + QS_PER_SUB * s + j];
            y[SUB * s + j] = KVALUES_FP4[(q & 0xF) as usize] as f32 * d;
            y[SUB * s + QS_PER_SUB + j] = KVALUES_FP4[(q >> 4) as usize] as f32 * d;
        }
    }
}

// The half-precision rows without the AVX-512 clone of the decode, which LLVM vectorises worse here
// (the rounding still runs at the CPU's widest, out of line): f16/bf16 values per second over f32's
// on one thread 0.36/0.32 with it, 0.84/0.86 without (AMD EPYC Zen 5, examples/cpu_throughput).
// `no_subnormals`: each value is a UE4M3 half-scale (at least 2^-10) times an FP4 integer: zero or
// at least 2^-10.
dequant_row!(half_rows = avx2, no_subnormals = |_| true, dequant_block);

//! TQ2_0 (ggml id 35): 256 values in 66 bytes. Spec: formats.md §4.24. GPU twin: shaders/formats/tq2_0.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 66;
/// `qs[64]`: four 2-bit codes per byte, elements 32 apart within a 128-element chunk.
pub const QS: usize = 0;
/// `d`: f16 scale.
pub const D: usize = 64;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::bytes("qs", QS, ELEMS / 4), Field::f16("d", D)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per 32-byte chunk of `qs`.
const CHUNK: usize = 128;
/// Bytes per chunk (and elements per bit pair).
const WIDE: usize = 32;

/// Decodes one block: `y = (code - 1) * d`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for c in 0..ELEMS / CHUNK {
        for s in 0..CHUNK / WIDE {
            for m in 0..WIDE {
                let q = (b[QS + WIDE * c + m] >> (2 * s)) & 3;
                y[CHUNK * c + WIDE * s + m] = (q as i32 - 1) as f32 * d;
            }
        }
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 70.89 without it, 88.09 with; on all threads 122.85 and 166.16 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(
    f32_lines = dequant_row_lines,
    f32_rows = avx512,
    no_subnormals = |_| true,
    dequant_block
);

// The f32 row for a destination off the cache line ([`crate::formats::lines`]).
crate::formats::common::line_row!(|b, out| {
    let (three, one) = (_mm512_set1_epi32(3), _mm512_set1_epi32(1));
    let d = _mm512_set1_ps(f16_le(b, D));
    for c in 0..ELEMS / CHUNK {
        let qs = [0, 16].map(|h| crate::formats::lines::widen(b, QS + WIDE * c + h));
        for s in 0..CHUNK / WIDE {
            let shift = _mm512_set1_epi32(2 * s as i32);
            for q in qs {
                let q = _mm512_and_si512(_mm512_srlv_epi32(q, shift), three);
                let q = _mm512_cvtepi32_ps(_mm512_sub_epi32(q, one));
                out.push(_mm512_mul_ps(q, d));
            }
        }
    }
});

//! Q5_0 (ggml id 6): 32 values in 22 bytes. Spec: formats.md §4.4. GPU twin: shaders/formats/q5_0.wgsl

use crate::formats::common::{dequant_row, f16_le, u32_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 22;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `qh`: u32 LE, bit k is the 5th bit of element k.
pub const QH: usize = 2;
/// `qs[16]`: low 4 bits; low nibbles are y[0..16], high nibbles y[16..32].
pub const QS: usize = 6;
/// Length of `qs`.
pub const QS_LEN: usize = ELEMS / 2;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::f16("d", D),
    Field::uint("qh", QH, 4),
    Field::bytes("qs", QS, QS_LEN),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y = (q5 - 16) * d`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let qh = u32_le(b, QH);
    for j in 0..QS_LEN {
        let q = b[QS + j] as u32;
        let lo = (q & 0xF) | (((qh >> j) & 1) << 4);
        let hi = (q >> 4) | (((qh >> (j + QS_LEN)) & 1) << 4);
        y[j] = (lo as i32 - 16) as f32 * d;
        y[j + QS_LEN] = (hi as i32 - 16) as f32 * d;
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 51.51 without it, 69.47 with; on all threads 99.89 and 131.97 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(
    f32_rows = avx512,
    no_subnormals = |_| true,
    half_tables,
    dequant_block
);

// The half rows where the CPU has AVX-512BW ([`crate::formats::permute`]): a block's 32 values
// `(k - 16) · d`, rounded, picked by each element's 5-bit code. f16/bf16 values per second over
// f32's on one thread 0.80/0.80 by the row clones, 1.12–1.15 by this (AMD EPYC Zen 5,
// examples/cpu_throughput).
crate::formats::common::table_row!(|b, round, out| {
    let d = _mm512_set1_ps(f16_le(b, D));
    let k_lo = _mm512_setr_ps(
        -16.0, -15.0, -14.0, -13.0, -12.0, -11.0, -10.0, -9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.0,
        -2.0, -1.0,
    );
    let k_hi = _mm512_setr_ps(
        0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
    );
    let table = permute::join(round(_mm512_mul_ps(k_lo, d)), round(_mm512_mul_ps(k_hi, d)));
    // Element j's low 4 bits: qs[j] & 0xF for j < 16, qs[j - 16] >> 4 after; its 5th: bit j of qh.
    let codes = permute::nibble_codes(b, QS);
    let fifth = _mm512_and_si512(_mm512_movm_epi16(u32_le(b, QH)), _mm512_set1_epi16(0x10));
    permute::pick(table, _mm512_or_si512(codes, fifth), out);
});

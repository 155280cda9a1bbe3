//! Q2_0 (ggml id 42): 64 values in 18 bytes. Spec: formats.md §4.28. GPU twin: shaders/formats/q2_0.wgsl

use crate::formats::common::{bytes_at, dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 64;
/// Bytes per block.
pub const BYTES: usize = 18;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `qs[16]`: 2-bit codes, 4 consecutive elements per byte, LSB first.
pub const QS: usize = 2;
/// Elements per `qs` byte.
const PER_BYTE: usize = 4;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::f16("d", D), Field::bytes("qs", QS, ELEMS / PER_BYTE)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y[j] = (q - 1) * d`, codes 0..3 giving -d, 0, d, 2d.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for j in 0..ELEMS {
        let q = (b[QS + j / PER_BYTE] >> (2 * (j % PER_BYTE))) & 3;
        y[j] = (q as i32 - 1) as f32 * d;
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 12.98 without it, 25.04 with; on all threads 25.39 and 48.37 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(
    f32_rows = avx512,
    no_subnormals = |_| true,
    half_tables,
    dequant_block
);

// The half rows where the CPU has AVX-512BW ([`crate::formats::permute`]): a block's 4 values
// `(k - 1) · d`, rounded, picked by each element's 2-bit code.
crate::formats::common::table_row!(|b, round, out| {
    let k = _mm512_setr_ps(
        -1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    );
    let values = round(_mm512_mul_ps(k, _mm512_set1_ps(f16_le(b, D))));
    let table = permute::join(values, values);
    // Element j's code: bits 2(j % 4).. of qs[j / 4].
    let qs = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(bytemuck::cast(bytes_at::<16>(b, QS))));
    let shifts: [u16; 32] = std::array::from_fn(|j| 2 * (j % PER_BYTE) as u16);
    let shifts: __m512i = bytemuck::cast(shifts);
    let (outs, _) = out.as_chunks_mut::<32>();
    for (half, o) in outs.iter_mut().enumerate() {
        let bytes: [u16; 32] = std::array::from_fn(|j| ((32 * half + j) / PER_BYTE) as u16);
        let q = _mm512_permutexvar_epi16(bytemuck::cast(bytes), qs);
        let codes = _mm512_and_si512(_mm512_srlv_epi16(q, shifts), _mm512_set1_epi16(3));
        permute::pick(table, codes, o);
    }
});

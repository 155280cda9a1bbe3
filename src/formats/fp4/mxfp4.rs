//! MXFP4 (ggml id 39): 32 values in 17 bytes. Spec: formats.md §4.25. GPU twin: shaders/formats/mxfp4.wgsl

use crate::formats::common::{dequant_row, e8m0_half};
use crate::formats::field::{self, Field};
use crate::formats::tables::KVALUES_FP4;

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 17;
/// `e`: E8M0 shared exponent (decoded halved, `2^(e-128)`, because the table is doubled).
pub const E: usize = 0;
/// `qs[16]`: E2M1 codes; low nibbles are y[0..16], high nibbles y[16..32].
pub const QS: usize = 1;
/// Length of `qs`.
pub const QS_LEN: usize = ELEMS / 2;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::uint("e", E, 1), Field::bytes("qs", QS, QS_LEN)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y = kvalues_fp4[code] * e8m0_half(e)`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = e8m0_half(b[E]);
    for j in 0..QS_LEN {
        let q = b[QS + j];
        y[j] = KVALUES_FP4[(q & 0xF) as usize] as f32 * d;
        y[j + QS_LEN] = KVALUES_FP4[(q >> 4) as usize] as f32 * d;
    }
}

// `no_subnormals`: each value is the E8M0 half-scale 2^(e-128) times an FP4 integer, normal or zero
// for e >= 2.
dequant_row!(no_subnormals = |b| b[E] >= 2, half_tables, dequant_block);

// The half rows where the CPU has AVX-512BW ([`crate::formats::permute`]): a block's 16 values
// `kvalues_fp4[k] · d`, rounded, picked by each element's code.
crate::formats::common::table_row!(|b, round, out| {
    let k: [f32; 16] = std::array::from_fn(|k| KVALUES_FP4[k] as f32);
    let values = round(_mm512_mul_ps(
        bytemuck::cast(k),
        _mm512_set1_ps(e8m0_half(b[E])),
    ));
    permute::pick(
        permute::join(values, values),
        permute::nibble_codes(b, QS),
        out,
    );
});

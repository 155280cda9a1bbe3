//! IQ4_NL (ggml id 20): 32 values in 18 bytes. Spec: formats.md §4.21. GPU twin: shaders/formats/iq4_nl.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};
use crate::formats::tables::KVALUES_IQ4NL;

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 18;
/// `d`: f16 scale.
pub const D: usize = 0;
/// `qs[16]`: 4-bit codes; low nibbles are y[0..16], high nibbles y[16..32].
pub const QS: usize = 2;
/// Length of `qs`.
pub const QS_LEN: usize = ELEMS / 2;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::f16("d", D), Field::bytes("qs", QS, QS_LEN)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y = d * kvalues_iq4nl[code]`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for j in 0..QS_LEN {
        let q = b[QS + j];
        y[j] = d * KVALUES_IQ4NL[(q & 0xF) as usize] as f32;
        y[j + QS_LEN] = d * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
    }
}

// `no_subnormals`: each value is an f16 scale times small integers, eighths or quarters: zero or at
// least 2^-27.
dequant_row!(no_subnormals = |_| true, half_tables, dequant_block);

// The half rows where the CPU has AVX-512BW ([`crate::formats::permute`]): a block's 16 values
// `d · kvalues_iq4nl[k]`, rounded, picked by each element's code.
crate::formats::common::table_row!(|b, round, out| {
    let k: [f32; 16] = std::array::from_fn(|k| KVALUES_IQ4NL[k] as f32);
    let values = round(_mm512_mul_ps(
        _mm512_set1_ps(f16_le(b, D)),
        bytemuck::cast(k),
    ));
    permute::pick(
        permute::join(values, values),
        permute::nibble_codes(b, QS),
        out,
    );
});

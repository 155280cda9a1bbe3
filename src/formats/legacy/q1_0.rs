//! Q1_0 (ggml id 41): 128 values in 18 bytes. Spec: formats.md §4.27. GPU twin: shaders/formats/q1_0.wgsl

use crate::formats::common::{dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 128;
/// Bytes per block.
pub const BYTES: usize = 18;
/// `d`: f16 magnitude.
pub const D: usize = 0;
/// `qs[16]`: one sign bit per element, LSB first (bit set = +d).
pub const QS: usize = 2;
/// Elements per `qs` byte.
const PER_BYTE: usize = 8;
/// Block layout.
pub const FIELDS: &[Field] = &[Field::f16("d", D), Field::bytes("qs", QS, ELEMS / PER_BYTE)];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Decodes one block: `y[j] = bit(j) ? d : -d`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    for j in 0..ELEMS {
        let bit = (b[QS + j / PER_BYTE] >> (j % PER_BYTE)) & 1;
        y[j] = if bit != 0 { d } else { -d };
    }
}

dequant_row!(dequant_block);

//! Q1_0 (ggml id 41): 128 values in 18 bytes. Spec: formats.md §4.27. GPU twin: shaders/formats/q1_0.wgsl

use crate::formats::common::{dequant_row, f16_le, half_by_code};
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

/// Maps each element's bit to an output by `out`.
#[inline(always)]
fn decode<T>(b: &[u8; BYTES], y: &mut [T; ELEMS], out: impl Fn(u8) -> T) {
    for (j, y) in y.iter_mut().enumerate() {
        *y = out((b[QS + j / PER_BYTE] >> (j % PER_BYTE)) & 1);
    }
}

/// Decodes one block: `y[j] = bit(j) ? d : -d`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    decode(b, y, |bit| if bit != 0 { d } else { -d });
}

// The f32 row without the AVX-512 clone, though it is faster with it (f32 GB/s on one thread 78.63
// without, 96.39 with): the half rows would then run at only 0.80 of it (AMD EPYC Zen 5,
// examples/cpu_throughput).
//
// A block has two values, `-d` and `d`: the half rows round those and select one per bit (f16/bf16
// values per second over f32's on one thread: 1.27/0.76 rounding every value; AMD EPYC Zen 5,
// examples/cpu_throughput).
dequant_row!(
    dequant_block,
    half = |src, dst, to_half| {
        let values = |b: &[u8; BYTES]| [-f16_le(b, D), f16_le(b, D)];
        half_by_code(
            src,
            dst,
            values,
            |b, h, bits| decode(b, bits, |bit| if bit != 0 { h[1] } else { h[0] }),
            to_half,
        )
    }
);

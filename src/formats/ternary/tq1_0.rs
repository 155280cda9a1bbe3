//! TQ1_0 (ggml id 34): 256 values in 54 bytes. Spec: formats.md §4.23. GPU twin: shaders/formats/tq1_0.wgsl

use crate::formats::common::{dequant_row, f16_le, half_by_code, pick};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 54;
/// `qs[48]`: 5 trits per byte (base-3 fixed-point fraction of 256).
pub const QS: usize = 0;
/// `qh[4]`: 4 trits per byte.
pub const QH: usize = 48;
/// `d`: f16 scale.
pub const D: usize = 52;
/// Length of `qs`.
pub const QS_LEN: usize = 48;
/// Length of `qh`.
pub const QH_LEN: usize = 4;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::bytes("qs", QS, QS_LEN),
    Field::bytes("qh", QH, QH_LEN),
    Field::f16("d", D),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// TQ1_0's `pow3`: multiplying by 3^n (mod 256) drops the first n trits.
pub const POW3: [u8; 6] = [1, 3, 9, 27, 81, 243];
/// Trits per `qs` byte.
const QS_TRITS: usize = 5;
/// Trits per `qh` byte.
const QH_TRITS: usize = 4;
/// `qs` bytes in the first (32-wide) pass.
const WIDE: usize = 32;
/// `qs` bytes in the second (16-wide) pass.
const NARROW: usize = QS_LEN - WIDE;

/// Digit `n` of a packed byte, a trit code in 0..3: `((byte * 3^n) mod 256) * 3 >> 8`.
#[inline(always)]
fn trit(byte: u8, n: usize) -> u8 {
    let q = byte.wrapping_mul(POW3[n]) as u16;
    ((q * 3) >> 8) as u8
}

/// The value of trit code `t`: `(t - 1) * d`.
#[inline(always)]
fn trit_value(t: u8, d: f32) -> f32 {
    (t as i32 - 1) as f32 * d
}

/// Maps each trit code of a block, in value order, to an output by `out`.
#[inline(always)]
fn decode<T>(b: &[u8; BYTES], y: &mut [T; ELEMS], out: impl Fn(u8) -> T) {
    for n in 0..QS_TRITS {
        for m in 0..WIDE {
            y[WIDE * n + m] = out(trit(b[QS + m], n));
        }
    }
    let base = WIDE * QS_TRITS;
    for n in 0..QS_TRITS {
        for m in 0..NARROW {
            y[base + NARROW * n + m] = out(trit(b[QS + WIDE + m], n));
        }
    }
    let base = base + NARROW * QS_TRITS;
    for n in 0..QH_TRITS {
        for m in 0..QH_LEN {
            y[base + QH_LEN * n + m] = out(trit(b[QH + m], n));
        }
    }
}

/// Decodes one block.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    decode(b, y, |t| trit_value(t, d));
}

// A block has three values, `-d`, `0 * d` and `d`: the half rows round those and select one per
// trit (f16/bf16 values per second over f32's on one thread: 0.78/0.67 rounding every value; AMD
// EPYC Zen 5, examples/cpu_throughput).
dequant_row!(
    half_rows = avx2,
    dequant_block,
    half = |src, dst, to_half| {
        let values = |b: &[u8; BYTES]| [0, 1, 2].map(|t| trit_value(t, f16_le(b, D)));
        half_by_code(
            src,
            dst,
            values,
            |b, h, bits| decode(b, bits, |t| pick(t, h)),
            to_half,
        )
    }
);

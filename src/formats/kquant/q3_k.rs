//! Q3_K (ggml id 11): 256 values in 110 bytes. Spec: formats.md §4.10. GPU twin: shaders/formats/q3_k.wgsl

use crate::formats::common::{bytes_at, dequant_row, f16_le};
use crate::formats::field::{self, Field};

/// Elements per block.
pub const ELEMS: usize = 256;
/// Bytes per block.
pub const BYTES: usize = 110;
/// `hmask[32]`: the high (3rd) bit of each code; bit `4*half + g` of byte l.
pub const HMASK: usize = 0;
/// `qs[64]`: the low 2 bits of each code (same arrangement as Q2_K).
pub const QS: usize = 32;
/// `scales[12]`: sixteen 6-bit signed scales, packed.
pub const SCALES: usize = 96;
/// `d`: f16 super-scale.
pub const D: usize = 108;
/// Length of `scales`.
pub const SCALES_LEN: usize = 12;
/// Block layout.
pub const FIELDS: &[Field] = &[
    Field::bytes("hmask", HMASK, ELEMS / 8),
    Field::bytes("qs", QS, ELEMS / 4),
    Field::bytes("scales", SCALES, SCALES_LEN),
    Field::f16("d", D),
];
const _: () = assert!(field::tiles(FIELDS, BYTES));

/// Elements per half (one pass over 32 `qs` bytes).
const HALF: usize = 128;
/// Elements sharing one 2-bit shift in a half.
const GROUP: usize = 32;
/// Elements per scale.
const SUB: usize = 16;
/// Number of scales.
const N_SCALES: usize = ELEMS / SUB;

/// The sixteen signed scales (-32..31) of spec §4.10: scale `j`'s low 4 bits are the low
/// (j < 8) or high nibble of byte `j % 8`, its high 2 bits are bits `2 * (j / 4)` of byte
/// `8 + j % 4`. Computed four scales to a `u32` with masks (as ggml does), with no loop and no
/// branch: written as a loop with a branch on `j < 8`, LLVM left it rolled in some builds and
/// the block decoder read the scales back from memory (Q3_K's f32 row at 35–39 GB/s, not 58–63,
/// one thread, Zen 5).
#[inline(always)]
fn unpack_scales(b: &[u8; BYTES]) -> [i32; N_SCALES] {
    const LOW4: u32 = 0x0f0f_0f0f;
    const HIGH2: u32 = 0x0303_0303;
    let word = |i: usize| u32::from_le_bytes(bytes_at(b, SCALES + 4 * i));
    let (a, c, high) = (word(0), word(1), word(2));
    let words = [
        (a & LOW4) | ((high & HIGH2) << 4),
        (c & LOW4) | (((high >> 2) & HIGH2) << 4),
        ((a >> 4) & LOW4) | (((high >> 4) & HIGH2) << 4),
        ((c >> 4) & LOW4) | (((high >> 6) & HIGH2) << 4),
    ];
    let mut s = [0i32; N_SCALES];
    for (j, s) in s.iter_mut().enumerate() {
        *s = ((words[j / 4] >> (8 * (j % 4))) & 0xff) as i32 - 32;
    }
    s
}

/// Decodes one block: `y = (d * S) * q` with `q = lo2 - (hbit ? 0 : 4)`.
#[inline(always)]
pub fn dequant_block(b: &[u8; BYTES], y: &mut [f32; ELEMS]) {
    let d = f16_le(b, D);
    let s = unpack_scales(b);
    // The sixteen `d * S` before any value, not one per sub-block inside the loop: 69-75 GB/s
    // against 61-64, f32 one thread, Zen 5.
    let mut dls = [0.0f32; N_SCALES];
    for (dl, s) in dls.iter_mut().zip(s) {
        *dl = d * s as f32;
    }
    for half in 0..ELEMS / HALF {
        for g in 0..HALF / GROUP {
            let m = 1u8 << (4 * half + g);
            for k in 0..GROUP / SUB {
                let base = HALF * half + GROUP * g + SUB * k;
                let dl = dls[base / SUB];
                for l in SUB * k..SUB * (k + 1) {
                    let lo2 = ((b[QS + GROUP * half + l] >> (2 * g)) & 3) as i32;
                    let q = lo2 - if b[HMASK + l] & m != 0 { 0 } else { 4 };
                    y[HALF * half + GROUP * g + l] = dl * q as f32;
                }
            }
        }
    }
}

// The f32 row with the AVX-512 clone, which LLVM vectorises better for this decoder: f32 GB/s on
// one thread 32.17 without it, 58.18 with; on all threads 56.74 and 102.53 (AMD EPYC Zen 5,
// examples/cpu_throughput).
// `no_subnormals`: each value is f16 scale times a small integer: zero or at least 2^-24.
dequant_row!(f32_rows = avx512, no_subnormals = |_| true, dequant_block);

//! Every block format against a per-element decoder written here from the spec's formulas
//! (formats.md §4), on random blocks (raw random bytes, NaN/Inf scales included) and hand-built
//! blocks; the spec §9 worked examples; int8 -128; NaN/Inf scales.

use gguf_dequant::formats::tables::*;
use gguf_dequant::Format;

use crate::support::codec::{decode, same};
use crate::support::rng;

fn f16(b: &[u8], k: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[k], b[k + 1]])).to_f32()
}
fn u16le(b: &[u8], k: usize) -> u32 {
    u16::from_le_bytes([b[k], b[k + 1]]) as u32
}
fn u32le(b: &[u8], k: usize) -> u32 {
    u32::from_le_bytes([b[k], b[k + 1], b[k + 2], b[k + 3]])
}
fn g64(t: &[u64], i: usize, j: usize) -> u8 {
    (t[i] >> (8 * j)) as u8
}
fn sgn(s: u8, j: usize) -> f32 {
    if (s >> j) & 1 == 1 {
        -1.0
    } else {
        1.0
    }
}

/// The spec's rule for element i of one block.
fn reference(f: Format, b: &[u8], i: usize) -> f32 {
    use Format::*;
    match f {
        Q4_0 => {
            ((if i < 16 {
                b[2 + i] & 15
            } else {
                b[2 + i - 16] >> 4
            }) as i32
                - 8) as f32
                * f16(b, 0)
        }
        Q4_1 => {
            (if i < 16 {
                b[4 + i] & 15
            } else {
                b[4 + i - 16] >> 4
            }) as f32
                * f16(b, 0)
                + f16(b, 2)
        }
        Q5_0 | Q5_1 => {
            let (qh, qs) = if f == Q5_0 { (2, 6) } else { (4, 8) };
            let lo = if i < 16 {
                b[qs + i] & 15
            } else {
                b[qs + i - 16] >> 4
            } as u32;
            let q = lo | (((u32le(b, qh) >> i) & 1) << 4);
            if f == Q5_0 {
                (q as i32 - 16) as f32 * f16(b, 0)
            } else {
                q as f32 * f16(b, 0) + f16(b, 2)
            }
        }
        Q8_0 => b[2 + i] as i8 as f32 * f16(b, 0),
        Q8_1 => b[4 + i] as i8 as f32 * f16(b, 0),
        Q8_K => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * b[4 + i] as i8 as f32,
        Q2_K => {
            let (half, r) = (i / 128, i % 128);
            let (g, l) = (r / 32, r % 32);
            let q = (b[16 + 32 * half + l] >> (2 * g)) & 3;
            let s = b[i / 16];
            (f16(b, 80) * (s & 15) as f32) * q as f32 - f16(b, 82) * (s >> 4) as f32
        }
        Q3_K => {
            let k = &b[96..108];
            let j = i / 16;
            let low4 = if j < 8 { k[j] & 15 } else { k[j - 8] >> 4 };
            let high2 = (k[8 + j % 4] >> (2 * (j / 4))) & 3;
            let s = (low4 | (high2 << 4)) as i32 - 32;
            let (half, r) = (i / 128, i % 128);
            let (g, l) = (r / 32, r % 32);
            let lo2 = ((b[32 + 32 * half + l] >> (2 * g)) & 3) as i32;
            let hbit = (b[l] >> (4 * half + g)) & 1;
            let q = lo2 - if hbit == 1 { 0 } else { 4 };
            (f16(b, 108) * s as f32) * q as f32
        }
        Q4_K | Q5_K => {
            let k = &b[4..16];
            let sub = i / 32;
            let (sc, m) = if sub < 4 {
                (k[sub] & 63, k[sub + 4] & 63)
            } else {
                (
                    (k[sub + 4] & 15) | ((k[sub - 4] >> 6) << 4),
                    (k[sub + 4] >> 4) | ((k[sub] >> 6) << 4),
                )
            };
            let qs = if f == Q4_K { 16 } else { 48 };
            let byte = b[qs + 32 * (i / 64) + i % 32];
            let mut q = if sub.is_multiple_of(2) {
                byte & 15
            } else {
                byte >> 4
            };
            if f == Q5_K {
                q += 16 * ((b[16 + i % 32] >> sub) & 1);
            }
            (f16(b, 0) * sc as f32) * q as f32 - f16(b, 2) * m as f32
        }
        Q6_K => {
            let (half, r) = (i / 128, i % 128);
            let (quad, l) = (r / 32, r % 32);
            let lb = b[64 * half + 32 * (quad % 2) + l];
            let lo4 = if quad < 2 { lb & 15 } else { lb >> 4 };
            let hi2 = (b[128 + 32 * half + l] >> (2 * quad)) & 3;
            let q = (lo4 | (hi2 << 4)) as i32 - 32;
            let sc = b[192 + 8 * half + 2 * quad + l / 16] as i8;
            (f16(b, 208) * sc as f32) * q as f32
        }
        IQ2_XXS => {
            let (ib, l, j) = (i / 32, (i % 32) / 8, i % 8);
            let g = &b[2 + 8 * ib..];
            let aux = u32le(g, 4);
            let db = (f16(b, 0) * (0.5 + (aux >> 28) as f32)) * 0.25;
            let s = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
            (db * g64(&IQ2XXS_GRID, g[l] as usize, j) as f32) * sgn(s, j)
        }
        IQ2_XS => {
            let (ib, l, j) = (i / 32, (i % 32) / 8, i % 8);
            let v = u16le(b, 2 + 2 * (4 * ib + l));
            let nib = if l < 2 {
                b[66 + ib] & 15
            } else {
                b[66 + ib] >> 4
            };
            let db = (f16(b, 0) * (0.5 + nib as f32)) * 0.25;
            let s = KSIGNS_IQ2XS[(v >> 9) as usize];
            (db * g64(&IQ2XS_GRID, (v & 511) as usize, j) as f32) * sgn(s, j)
        }
        IQ2_S => {
            let (ib, l, j) = (i / 32, (i % 32) / 8, i % 8);
            let idx = b[2 + 4 * ib + l] as usize | ((((b[66 + ib] >> (2 * l)) & 3) as usize) << 8);
            let nib = if l < 2 {
                b[74 + ib] & 15
            } else {
                b[74 + ib] >> 4
            };
            let db = (f16(b, 0) * (0.5 + nib as f32)) * 0.25;
            (db * g64(&IQ2S_GRID, idx, j) as f32) * sgn(b[34 + 4 * ib + l], j)
        }
        IQ3_XXS => {
            let (ib, l, j) = (i / 32, (i % 32) / 8, i % 8);
            let aux = u32le(b, 66 + 4 * ib);
            let db = (f16(b, 0) * (0.5 + (aux >> 28) as f32)) * 0.5;
            let s = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
            let idx = b[2 + 8 * ib + 2 * l + j / 4] as usize;
            let g = (IQ3XXS_GRID[idx] >> (8 * (j % 4))) as u8;
            (db * g as f32) * sgn(s, j)
        }
        IQ3_S => {
            let (ib, l, j) = (i / 32, (i % 32) / 8, i % 8);
            let sc = (b[106 + ib / 2] >> (4 * (ib % 2))) & 15;
            let db = f16(b, 0) * (1 + 2 * sc as i32) as f32;
            let k = 2 * l + j / 4;
            let idx = b[2 + 8 * ib + k] as usize | ((((b[66 + ib] >> k) & 1) as usize) << 8);
            let g = (IQ3S_GRID[idx] >> (8 * (j % 4))) as u8;
            (db * g as f32) * sgn(b[74 + 4 * ib + l], j)
        }
        IQ1_S => {
            let (ib, l, j) = (i / 32, (i % 32) / 8, i % 8);
            let h = u16le(b, 34 + 2 * ib);
            let dl = f16(b, 0) * (2 * ((h >> 12) & 7) + 1) as f32;
            let delta = if h & 0x8000 != 0 { -0.125 } else { 0.125 };
            let idx = b[2 + 4 * ib + l] as usize | ((((h >> (3 * l)) & 7) as usize) << 8);
            dl * (g64(&IQ1S_GRID, idx, j) as i8 as f32 + delta)
        }
        IQ1_M => {
            let (ib, l, j) = (i / 32, (i % 32) / 8, i % 8);
            let sc: Vec<u32> = (0..4).map(|k| u16le(b, 48 + 2 * k)).collect();
            let dbits =
                (sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000);
            let d = half::f16::from_bits(dbits as u16).to_f32();
            let w = sc[ib / 2] >> (6 * (ib % 2));
            let dl = if l < 2 {
                d * (2 * (w & 7) + 1) as f32
            } else {
                d * (2 * ((w >> 3) & 7) + 1) as f32
            };
            let hb = b[32 + 2 * ib + l / 2] >> (4 * (l % 2));
            let idx = b[4 * ib + l] as usize | (((hb & 7) as usize) << 8);
            let delta = if hb & 8 != 0 { -0.125 } else { 0.125 };
            dl * (g64(&IQ1S_GRID, idx, j) as i8 as f32 + delta)
        }
        IQ4_NL => {
            let c = if i < 16 {
                b[2 + i] & 15
            } else {
                b[2 + i - 16] >> 4
            };
            f16(b, 0) * KVALUES_IQ4NL[c as usize] as f32
        }
        IQ4_XS => {
            let (ib, j) = (i / 32, i % 32);
            let ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) as i32
                | (((u16le(b, 2) >> (2 * ib)) & 3) << 4) as i32;
            let dl = f16(b, 0) * (ls - 32) as f32;
            let q = b[8 + 16 * ib + j % 16];
            let c = if j < 16 { q & 15 } else { q >> 4 };
            dl * KVALUES_IQ4NL[c as usize] as f32
        }
        TQ1_0 => {
            let (byte, n) = if i < 160 {
                (b[i % 32], i / 32)
            } else if i < 240 {
                (b[32 + (i - 160) % 16], (i - 160) / 16)
            } else {
                (b[48 + (i - 240) % 4], (i - 240) / 4)
            };
            let q = byte.wrapping_mul([1u8, 3, 9, 27, 81][n]) as u32;
            let t = (q * 3) >> 8;
            (t as i32 - 1) as f32 * f16(b, 52)
        }
        TQ2_0 => {
            let (c, s, m) = (i / 128, (i % 128) / 32, i % 32);
            let q = (b[32 * c + m] >> (2 * s)) & 3;
            (q as i32 - 1) as f32 * f16(b, 64)
        }
        MXFP4 => {
            let c = if i < 16 {
                b[1 + i] & 15
            } else {
                b[1 + i - 16] >> 4
            };
            let d = (2f64.powi(b[0] as i32 - 128)) as f32;
            KVALUES_FP4[c as usize] as f32 * d
        }
        NVFP4 => {
            let (s, j) = (i / 16, i % 16);
            let q = b[4 + 8 * s + j % 8];
            let c = if j < 8 { q & 15 } else { q >> 4 };
            let x = b[s];
            let e = ((x >> 3) & 15) as i32;
            let m = (x & 7) as f64;
            let raw = if x == 0 || x == 0x7F {
                0.0
            } else if e == 0 {
                m * 2f64.powi(-9)
            } else {
                (1.0 + m / 8.0) * 2f64.powi(e - 7)
            };
            KVALUES_FP4[c as usize] as f32 * (raw * 0.5) as f32
        }
        Q1_0 => {
            let d = f16(b, 0);
            if (b[2 + i / 8] >> (i % 8)) & 1 == 1 {
                d
            } else {
                -d
            }
        }
        Q2_0 => ((((b[2 + i / 4] >> (2 * (i % 4))) & 3) as i32) - 1) as f32 * f16(b, 0),
        F32 | F16 | BF16 | F64 | I8 | I16 | I32 | I64 | F8_E4M3 => {
            unreachable!("tested in codec_scalars")
        }
    }
}

fn block_formats() -> impl Iterator<Item = Format> {
    Format::ALL.iter().copied().filter(|f| f.block_elems() > 1)
}

fn check_against_reference(f: Format, src: &[u8], what: &str) {
    let y = decode(f, src);
    let (e, n) = (f.block_elems(), f.block_bytes());
    for (bi, b) in src.chunks_exact(n).enumerate() {
        for i in 0..e {
            let want = reference(f, b, i);
            let got = y[bi * e + i];
            assert!(
                same(got, want),
                "{f} {what}: block {bi} element {i}: got {got:e}, spec {want:e}"
            );
        }
    }
}

#[test]
fn random_blocks_match_spec_rules() {
    for f in block_formats() {
        let seed = 0x9E37_79B9_7F4A_7C15 ^ f.id() as u64;
        let src = rng::bytes(64 * f.block_bytes(), seed);
        check_against_reference(f, &src, "random");
    }
}

#[test]
fn patterned_blocks_match_spec_rules() {
    // Byte k = 37k + 11 (every nibble and bit position varies), with a tame scale byte pattern.
    for f in block_formats() {
        for salt in 0..4u8 {
            let src: Vec<u8> = (0..f.block_bytes())
                .map(|k| (37 * k as u32 + 11 + 64 * salt as u32) as u8)
                .collect();
            check_against_reference(f, &src, "patterned");
        }
    }
}

fn q4_0_example() -> Vec<u8> {
    vec![
        0xc0, 0x33, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6,
        0xf7, 0xf7, 0xf8,
    ]
}

#[test]
fn spec_worked_example_q4_0() {
    let y = decode(Format::Q4_0, &q4_0_example());
    let want = [
        -1.9375f32, -1.6953125, -1.6953125, -1.453125, -1.453125, -1.2109375, -1.2109375, -0.96875,
    ];
    assert_eq!(&y[..8], &want);
    assert_eq!(y[16], 0.0);
}

#[test]
fn spec_worked_example_q4_k() {
    let mut b = vec![
        0x1f, 0x21, 0x1f, 0x1d, 0x4a, 0x8b, 0xcc, 0x0d, 0x52, 0x93, 0xd4, 0x15, 0x21, 0x43, 0x65,
        0x87,
    ];
    b.extend((0..128u32).map(|k| ((37 * k + 11) % 256) as u8));
    let y = decode(Format::Q4_K, &b);
    let want0: [f64; 8] = [
        1.0102157592773438f64,
        -0.09001922607421875,
        0.41008758544921875,
        0.9101943969726562,
        1.4103012084960938,
        0.31006622314453125,
        0.8101730346679688,
        1.3102798461914062,
    ];
    let want32: [f64; 8] = [
        -0.09502029418945312f64,
        0.23505020141601562,
        0.4550971984863281,
        0.6751441955566406,
        0.8951911926269531,
        1.2252616882324219,
        1.4453086853027344,
        -0.09502029418945312,
    ];
    let want128: [f64; 8] = [
        1.7803802490234375f64,
        -0.09001922607421875,
        0.760162353515625,
        1.6103439331054688,
        2.4605255126953125,
        0.5901260375976562,
        1.4403076171875,
        2.2904891967773438,
    ];
    // The spec prints exact decimal expansions of the f32 results: compare exactly in f64.
    let exact = |got: &[f32], want: &[f64]| {
        for (g, w) in got.iter().zip(want) {
            assert_eq!(*g as f64, *w);
        }
    };
    exact(&y[..8], &want0);
    exact(&y[32..40], &want32);
    exact(&y[128..136], &want128);
}

#[test]
fn minus_128_in_q8_formats() {
    let one = 0x3C00u16.to_le_bytes();
    let mut q80 = one.to_vec();
    q80.extend([0x80u8; 32]);
    assert!(decode(Format::Q8_0, &q80).iter().all(|&v| v == -128.0));
    let mut q81 = one.to_vec();
    q81.extend([0xFF, 0x7B]); // s = -65504, ignored
    q81.extend([0x80u8; 32]);
    assert!(decode(Format::Q8_1, &q81).iter().all(|&v| v == -128.0));
    let mut q8k = 0.5f32.to_le_bytes().to_vec();
    q8k.extend([0x80u8; 256]);
    q8k.extend([0u8; 32]);
    assert!(decode(Format::Q8_K, &q8k).iter().all(|&v| v == -64.0));
}

#[test]
fn nan_and_inf_scales_propagate() {
    const INF: [u8; 2] = [0x00, 0x7C];
    const NAN: [u8; 2] = [0x00, 0x7E];
    // Q4_0, d = Inf: code 8 (zero) gives Inf * 0 = NaN, code 9 gives Inf, code 7 gives -Inf.
    let mut b = INF.to_vec();
    b.extend([0x98u8; 8]);
    b.extend([0x87u8; 8]);
    let y = decode(Format::Q4_0, &b);
    assert!(y[0].is_nan() && y[16] == f32::INFINITY && y[8] == -f32::INFINITY && y[31].is_nan());
    // Q4_1, m = NaN: everything NaN.
    let mut b = 0x3C00u16.to_le_bytes().to_vec();
    b.extend(NAN);
    b.extend([0x12u8; 16]);
    assert!(decode(Format::Q4_1, &b).iter().all(|v| v.is_nan()));
    // Q4_K, d = Inf with scale 0: (Inf * 0) * q - dmin*m = NaN.
    let mut b = INF.to_vec();
    b.extend(0x3C00u16.to_le_bytes());
    b.extend([0u8; 12]);
    b.extend([0x11u8; 128]);
    assert!(decode(Format::Q4_K, &b).iter().all(|v| v.is_nan()));
    // Q8_K, d = Inf: qs 0 gives NaN, qs 1 gives Inf.
    let mut b = f32::INFINITY.to_le_bytes().to_vec();
    b.extend((0..256).map(|i| (i % 2) as u8));
    b.extend([0u8; 32]);
    let y = decode(Format::Q8_K, &b);
    assert!(y[0].is_nan() && y[1] == f32::INFINITY);
}

#[test]
fn f16_subnormal_scales_are_exact() {
    // d = 0x0001 = 2^-24; Q8_0 codes 1, -1, 127, -128.
    let mut b = vec![0x01, 0x00, 1, 0xFF, 127, 0x80];
    b.extend([0u8; 28]);
    let y = decode(Format::Q8_0, &b);
    let t = 2f32.powi(-24);
    assert_eq!(&y[..4], &[t, -t, 127.0 * t, -128.0 * t]);
}

#[test]
fn hand_built_blocks_by_family() {
    // Legacy, Q5_0: d = 1, qs[0] = 0x21, qh bit 0 and bit 16 set: y[0] = (1|16)-16 = 1,
    // y[16] = (2|16)-16 = 2, y[1] = 0-16.
    let mut b = vec![0x00, 0x3C, 0x01, 0x00, 0x01, 0x00, 0x21];
    b.extend([0u8; 15]);
    let y = decode(Format::Q5_0, &b);
    assert_eq!((y[0], y[16], y[1], y[17]), (1.0, 2.0, -16.0, -16.0));

    // Q1_0: LSB-first bits; d = 2.
    let mut b = vec![0x00, 0x40, 0b0000_0101];
    b.extend([0u8; 15]);
    let y = decode(Format::Q1_0, &b);
    assert_eq!(&y[..4], &[2.0, -2.0, 2.0, -2.0]);

    // Q2_0: consecutive 2-bit codes, byte 0b11_10_01_00 -> -d, 0, d, 2d.
    let mut b = vec![0x00, 0x3C, 0b1110_0100];
    b.extend([0x55u8; 15]);
    let y = decode(Format::Q2_0, &b);
    assert_eq!(&y[..5], &[-1.0, 0.0, 1.0, 2.0, 0.0]);

    // k-quant, Q6_K: d = 1, scales[0] = -2, ql[0] = 0xA5, qh[0] = 0b11_10_01_00.
    let mut b = vec![0u8; 210];
    b[0] = 0xA5;
    b[128] = 0b1110_0100;
    b[192..208].copy_from_slice(&[0xFE; 16]);
    b[208..210].copy_from_slice(&0x3C00u16.to_le_bytes());
    let y = decode(Format::Q6_K, &b);
    // q1 = (5 | 0<<4) - 32 = -27; q3 = (0xA | 2<<4) - 32 = 10 (element 64).
    assert_eq!(y[0], -2.0 * -27.0);
    assert_eq!(y[64], -2.0 * 10.0);
    assert_eq!(y[32], -2.0 * ((1 << 4) - 32) as f32);

    // i-quant, IQ4_NL: d = 1, qs[0] = 0xF0 -> kvalues[0], kvalues[15].
    let mut b = vec![0x00, 0x3C, 0xF0];
    b.extend([0x88u8; 15]);
    let y = decode(Format::IQ4_NL, &b);
    assert_eq!((y[0], y[16], y[1]), (-127.0, 113.0, 1.0));

    // Ternary, TQ2_0: codes 0,1,2 at bit pairs 0,1,2 of qs[0] -> -d, 0, d, elements 32 apart.
    let mut b = vec![0u8; 66];
    b[0] = 0b0010_0100;
    b[64..66].copy_from_slice(&0x4000u16.to_le_bytes());
    let y = decode(Format::TQ2_0, &b);
    assert_eq!(
        (y[0], y[32], y[64], y[96], y[1]),
        (-2.0, 0.0, 2.0, -2.0, -2.0)
    );

    // TQ1_0: byte 0 = ceil(v * 256 / 243) for trits (2,0,1,2,1) -> values (+1,-1,0,+1,0).
    let v = [2u32, 0, 1, 2, 1].iter().fold(0, |acc, t| 3 * acc + t);
    let byte = (v * 256).div_ceil(243);
    let mut b = vec![0u8; 54];
    b[0] = byte as u8;
    b[52..54].copy_from_slice(&0x3C00u16.to_le_bytes());
    let y = decode(Format::TQ1_0, &b);
    assert_eq!(
        [y[0], y[32], y[64], y[96], y[128]],
        [1.0, -1.0, 0.0, 1.0, 0.0]
    );

    // FP4, NVFP4: scale 0x38 (raw 1.0, halved 0.5) in sub-block 1, qs[8] = 0x7F -> codes 15, 7.
    let mut b = vec![0u8; 36];
    b[1] = 0x38;
    b[4 + 8] = 0x7F;
    let y = decode(Format::NVFP4, &b);
    assert_eq!((y[16], y[24]), (-12.0 * 0.5, 12.0 * 0.5));
}

//! Exhaustive scalar codes: every f16, bf16, E8M0 (MXFP4 scale), UE4M3 (NVFP4 scale) and E4M3
//! (F8_E4M3) code, decoded by the codecs and checked against rules written here from the spec.

use gguf_dequant::formats::common::{f16_bits, f16_le};
use gguf_dequant::Format;

use crate::support::codec::{decode, same};

/// Spec §2.1, in f64.
fn f16_rule(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1F) as i32;
    let m = (h & 0x3FF) as f64;
    let v = match e {
        0 => m * 2f64.powi(-24),
        31 if m == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    };
    (sign * v) as f32
}

#[test]
fn every_f16_code() {
    let src: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    let y = decode(Format::F16, &src);
    for h in 0..=u16::MAX {
        let want = f16_rule(h);
        assert!(
            same(y[h as usize], want),
            "F16 {h:#06x}: {} != {want}",
            y[h as usize]
        );
        assert!(same(f16_bits(h), want), "f16_bits {h:#06x}");
        assert!(
            same(f16_bits(h), half::f16::from_bits(h).to_f32()),
            "vs half {h:#06x}"
        );
        assert!(same(f16_le(&h.to_le_bytes(), 0), want), "f16_le {h:#06x}");
        // A NaN stays NaN with the quiet bit set, as ggml's conversion gives it.
        if want.is_nan() {
            assert_eq!(f16_bits(h).to_bits() & 0x0040_0000, 0x0040_0000);
        }
    }
}

#[test]
fn every_f16_code_as_a_block_scale() {
    // Q4_0 with every d and codes 9 (= +1) and 7 (= -1): y = ±d exactly, subnormals included.
    let mut src = Vec::new();
    for h in 0..=u16::MAX {
        src.extend_from_slice(&h.to_le_bytes());
        src.extend_from_slice(&[0x79; 16]);
    }
    let y = decode(Format::Q4_0, &src);
    for h in 0..=u16::MAX {
        let d = f16_rule(h);
        let blk = &y[32 * h as usize..32 * (h as usize + 1)];
        assert!(same(blk[0], d), "Q4_0 d={h:#06x}");
        assert!(same(blk[16], -d), "Q4_0 d={h:#06x} high nibble");
    }
}

#[test]
fn every_bf16_code() {
    let src: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    let y = decode(Format::BF16, &src);
    for h in 0..=u16::MAX {
        assert_eq!(y[h as usize].to_bits(), (h as u32) << 16, "BF16 {h:#06x}");
    }
}

#[test]
fn every_e8m0_exponent_in_mxfp4() {
    let kv: [i32; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];
    let mut src = Vec::new();
    for e in 0..=255u8 {
        src.push(e);
        // Codes 0..15 in the low nibbles, 15..0 in the high nibbles.
        src.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    }
    let y = decode(Format::MXFP4, &src);
    for e in 0..=255usize {
        // Spec §2.3 / §4.25: d = 2^(e-128); the product is exact or overflows.
        let d = 2f64.powi(e as i32 - 128);
        for j in 0..16 {
            let lo = (kv[j] as f64 * d) as f32;
            let hi = (kv[15 - j] as f64 * d) as f32;
            assert!(same(y[32 * e + j], lo), "MXFP4 e={e} code {j}");
            assert!(same(y[32 * e + 16 + j], hi), "MXFP4 e={e} code {}", 15 - j);
        }
    }
    // The documented edges.
    assert_eq!(y[1].to_bits(), 0x0020_0000, "e=0, code 1 -> 2^-128");
    assert_eq!(y[32 * 255 + 1], 2f32.powi(127), "e=255, code 1 -> 2^127");
    assert_eq!(y[32 * 255 + 2], f32::INFINITY, "e=255, code 2 -> overflow");
}

#[test]
fn every_ue4m3_code_in_nvfp4_matches_ggml_lut() {
    let t = crate::support::spec_tables();
    let lut: Vec<f32> = t["_derived"]["ue4m3_half_to_f32"]
        .as_array()
        .expect("_derived.ue4m3_half_to_f32")
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(lut.len(), 256);
    // One block per 4 codes: sub-block s has scale code 4k+s and all E2M1 codes 1 (kvalue 1).
    let mut src = Vec::new();
    for k in 0..64u8 {
        src.extend((0..4).map(|s| 4 * k + s));
        src.extend([0x11u8; 32]);
    }
    let y = decode(Format::NVFP4, &src);
    for x in 0..256 {
        for j in 0..16 {
            assert_eq!(
                y[16 * x + j].to_bits(),
                lut[x].to_bits(),
                "NVFP4 scale {x:#04x}"
            );
        }
    }
    assert_eq!(lut[0xFF], 240.0);
    assert_eq!(lut[0x7F], 0.0);
}

/// Spec §2.6.
fn e4m3_rule(x: u8) -> f32 {
    if x & 0x7F == 0x7F {
        return f32::NAN;
    }
    let sign = if x & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((x >> 3) & 0xF) as i32;
    let m = (x & 7) as f64;
    let v = if e == 0 {
        m * 2f64.powi(-9)
    } else {
        (1.0 + m / 8.0) * 2f64.powi(e - 7)
    };
    (sign * v) as f32
}

#[test]
fn every_e4m3_code() {
    let src: Vec<u8> = (0..=255).collect();
    let y = decode(Format::F8_E4M3, &src);
    for x in 0..=255u8 {
        assert!(same(y[x as usize], e4m3_rule(x)), "F8_E4M3 {x:#04x}");
    }
    assert!(y[0x7F].is_nan() && y[0xFF].is_nan());
    assert_eq!(y[0x7E], 448.0);
    assert_eq!(y[0x80].to_bits(), (-0.0f32).to_bits());
    assert_eq!(y[0x01], 2f32.powi(-9));
}

#[test]
fn every_i8_and_i16() {
    let src: Vec<u8> = (0..=255).collect();
    let y = decode(Format::I8, &src);
    for x in 0..=255u8 {
        assert_eq!(y[x as usize], x as i8 as f32);
    }
    let src: Vec<u8> = (i16::MIN..=i16::MAX)
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let y = decode(Format::I16, &src);
    for (i, v) in (i16::MIN..=i16::MAX).enumerate() {
        assert_eq!(y[i], v as f32);
    }
}

#[test]
fn wide_ints_and_f64_round_to_nearest_even() {
    let i32s = [
        0,
        1,
        -1,
        16_777_217,
        16_777_219,
        -16_777_217,
        i32::MAX,
        i32::MIN,
    ];
    let want32 = [
        0.0,
        1.0,
        -1.0,
        16_777_216.0,
        16_777_220.0,
        -16_777_216.0,
        2147483648.0,
        -2147483648.0,
    ];
    let src: Vec<u8> = i32s.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(decode(Format::I32, &src), want32);

    let i64s = [(1i64 << 24) + 1, (1 << 24) + 3, i64::MAX, i64::MIN, -5];
    let want64 = [
        16_777_216.0,
        16_777_220.0,
        2f32.powi(63),
        -(2f32.powi(63)),
        -5.0,
    ];
    let src: Vec<u8> = i64s.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(decode(Format::I64, &src), want64);

    // Halfway between 1 and 1 + 2^-23 rounds to even (1); just above rounds up.
    let f64s = [
        1.0 + 2f64.powi(-24),
        1.0 + 2f64.powi(-24) + 2f64.powi(-40),
        1e39,
        -1e39,
        1e-50,
        2f64.powi(-140),
        f64::NAN,
        f64::INFINITY,
        -0.0,
    ];
    let src: Vec<u8> = f64s.iter().flat_map(|v| v.to_le_bytes()).collect();
    let y = decode(Format::F64, &src);
    let want = [
        1.0,
        1.0 + 2f32.powi(-23),
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        f32::from_bits(1 << 9),
        f32::NAN,
        f32::INFINITY,
        -0.0,
    ];
    for (i, (a, b)) in y.iter().zip(want).enumerate() {
        assert!(same(*a, b), "F64 case {i}: {a} != {b}");
    }
}

#[test]
fn f32_passes_bits_through() {
    let bits = [
        0u32,
        0x8000_0000,
        1,
        0x7F80_0000,
        0x7FC0_1234,
        0x7F80_0001,
        0x3F80_0000,
    ];
    let src: Vec<u8> = bits.iter().flat_map(|v| v.to_le_bytes()).collect();
    let y = decode(Format::F32, &src);
    for (a, b) in y.iter().zip(bits) {
        assert_eq!(a.to_bits(), b);
    }
}

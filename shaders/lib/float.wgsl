// Scalar encodings of formats.md §2, decoded and encoded with integer operations only.
// CPU twins: f16_bits, f16_le, bf16_le, e8m0_half, ue4m3_half, e4m3_to_f32 in
// src/formats/common.rs (which use the `half` crate); output rounding twins half::f16::from_f32
// and half::bf16::from_f32.
//
// Why integers: no `shader-f16` capability is needed, `unpack2x16float` may flush f16
// subnormals, and GPUs may canonicalise NaN payloads or flush f32 subnormals in float
// operations. Every function here is exact and bit-for-bit the CPU's result. binary16 itself is
// converted in half.wgsl (or, by the matvec kernels' `hw_f16` variant, in half_unpack.wgsl).

const EXP_MASK_F32: u32 = 0x7F800000u;
const MANT_MASK_F32: u32 = 0x007FFFFFu;

// binary16 bits to f32 (twin of common.rs `f16_bits`).
fn f16_bits(h: u32) -> f32 {
    return bitcast<f32>(f16_to_f32_bits(h));
}

// The little-endian f16 at tile offset `byte`, as f32.
fn f16_le(byte: u32) -> f32 {
    return f16_bits(load_u16(byte));
}

// The little-endian bf16 at tile offset `byte`, as f32 (spec §2.2: the bits shifted up by 16).
fn bf16_le(byte: u32) -> f32 {
    return bitcast<f32>(load_u16(byte) << 16u);
}

// ggml's ggml_e8m0_to_fp32_half: 2^(e-128) (spec §2.3). Codes 0 and 1 are f32 subnormals: this
// float form is for completeness; MXFP4 uses the exact integer product `fp4_e8m0_half_bits`.
fn e8m0_half(e: u32) -> f32 {
    return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
}

// kvalues_fp4[c] * 2^(e-128) (MXFP4, spec §4.25), exactly, as f32 bits, built with integer
// operations so that the subnormal results of e = 0 and e = 1 and the overflow to Inf of e = 255
// come out as the CPU's correctly rounded product on every GPU, flushing or not.
fn fp4_e8m0_half_bits(c: u32, e: u32) -> u32 {
    let mag = c & 7u;                 // E2M1 magnitude: doubled values 0,1,2,3,4,6,8,12
    if (mag == 0u) {
        return 0u;                    // codes 0 and 8: int8 0 times d is +0
    }
    let sign = (c & 8u) << 28u;
    // doubled value = 1.f * 2^p with p = mag / 2, and f = .5 for the odd codes 3, 5, 7
    let frac = select(0u, 0x00400000u, (mag & 1u) == 1u && mag > 1u);
    let biased = i32(mag >> 1u) + i32(e) - 1;   // f32 exponent field of 1.f * 2^(p + e - 128)
    if (biased >= 255) {
        return sign | EXP_MASK_F32;
    }
    if (biased >= 1) {
        return sign | (u32(biased) << 23u) | frac;
    }
    // biased is 0 or -1: a subnormal, exact because the significand has at most 2 bits.
    return sign | ((0x00800000u | frac) >> u32(1 - biased));
}

// ggml's ggml_ue4m3_to_fp32 as f32 bits: an NVFP4 sub-block scale, already halved (spec §2.5).
// Bit 7 is ignored; 0x00 and 0x7F give 0.
fn ue4m3_half_bits(x: u32) -> u32 {
    // Only the codes 0x00 and 0x7F are special: 0x80 decodes as 0 by the formula and 0xFF as
    // 240 (bit 7 dropped), exactly as the CPU.
    if (x == 0u || x == 0x7Fu) {
        return 0u;
    }
    let e = (x >> 3u) & 0xFu;
    let m = x & 7u;
    if (m == 0u && e == 0u) {
        return 0u;
    }
    if (e == 0u) {
        // m * 2^-9 * 0.5 = m * 2^-10, a normal f32.
        let p = firstLeadingBit(m);
        return ((p + 117u) << 23u) | ((m << (23u - p)) & MANT_MASK_F32);
    }
    // (1 + m/8) * 2^(e-7) * 0.5
    return ((e + 119u) << 23u) | (m << 20u);
}

// ue4m3_half as f32 (twin of common.rs `ue4m3_half`).
fn ue4m3_half(x: u32) -> f32 {
    return bitcast<f32>(ue4m3_half_bits(x));
}

// OCP FP8 E4M3FN code to f32 bits (spec §2.6; twin of common.rs `e4m3_to_f32`): sign bit 7,
// bias 7, exponent 0 subnormal, 0x7F and 0xFF NaN, no infinities.
fn e4m3_to_f32_bits(x: u32) -> u32 {
    let s = (x & 0x80u) << 24u;
    let c = x & 0x7Fu;
    if (c == 0x7Fu) {
        return 0x7FC00000u;           // f32::NAN, as the CPU codec returns
    }
    let e = c >> 3u;
    let m = c & 7u;
    if (e == 0u) {
        if (m == 0u) {
            return s;
        }
        let p = firstLeadingBit(m);   // m * 2^-9
        return s | ((p + 118u) << 23u) | ((m << (23u - p)) & MANT_MASK_F32);
    }
    return s | ((e + 120u) << 23u) | (m << 20u);
}

// f32 bits to binary16 bits, round to nearest even, with subnormals, Inf and NaN: the same
// algorithm as half::f16::from_f32 (so the same NaN: quiet bit set, top payload bits kept).
fn f32_bits_to_f16(x: u32) -> u32 {
    let sign = (x >> 16u) & 0x8000u;
    let exp = x & EXP_MASK_F32;
    let man = x & MANT_MASK_F32;
    if (exp == EXP_MASK_F32) {
        return sign | 0x7C00u | select(0u, 0x0200u, man != 0u) | (man >> 13u);
    }
    let half_exp = i32(exp >> 23u) - 127 + 15;
    if (half_exp >= 0x1F) {
        return sign | 0x7C00u;
    }
    if (half_exp <= 0) {
        if (14 - half_exp > 24) {
            return sign;
        }
        let m = man | 0x00800000u;
        let shift = u32(14 - half_exp);               // 14..24
        var half_man = m >> shift;
        let round_bit = 1u << (shift - 1u);
        if ((m & round_bit) != 0u && (m & (3u * round_bit - 1u)) != 0u) {
            half_man += 1u;
        }
        return sign | half_man;
    }
    let h = sign | (u32(half_exp) << 10u) | (man >> 13u);
    let round_bit = 0x00001000u;
    if ((man & round_bit) != 0u && (man & (3u * round_bit - 1u)) != 0u) {
        return h + 1u;                 // a carry into the exponent gives the right next value / Inf
    }
    return h;
}

// f32 bits to bfloat16 bits, round to nearest even, as half::bf16::from_f32 (NaN: quiet bit set).
fn f32_bits_to_bf16(x: u32) -> u32 {
    if ((x & 0x7FFFFFFFu) > EXP_MASK_F32) {
        return (x >> 16u) | 0x0040u;
    }
    let round_bit = 0x00008000u;
    if ((x & round_bit) != 0u && (x & (3u * round_bit - 1u)) != 0u) {
        return (x >> 16u) + 1u;
    }
    return x >> 16u;
}

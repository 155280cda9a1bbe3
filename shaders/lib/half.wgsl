// binary16 to f32 with integer operations only (spec §2.1): exact on every adapter, bit for bit
// the CPU's `f16_bits` (src/formats/common.rs). The matvec kernels' `hw_f16` variant composes
// half_unpack.wgsl in this file's place (src/gpu/kernels/family/matvec.rs), on devices whose own
// conversion was probed exact.

// IEEE binary16 bits (low 16 bits of `h`) to the bits of the equal f32 (spec §2.1). Subnormals
// are normalised exactly; Inf stays Inf; NaN keeps its payload with the quiet bit set (as `half`).
// Branch-free (every case computed, one selected): CPU adapters run invocations as SIMD lanes,
// where a branch costs both sides and the masking around them.
fn f16_to_f32_bits(h: u32) -> u32 {
    let s = (h & 0x8000u) << 16u;
    let a = h & 0x7FFFu; // exponent and mantissa
    // Exponent 1..30: rebias 15 -> 127.
    let normal = (a << 13u) + 0x38000000u;
    // Exponent 0: a * 2^-24 with a < 2^10, a normal f32 whose leading bit is bit p of a (0 for 0).
    let p = firstLeadingBit(a);
    let sub = select(0u, ((p + 103u) << 23u) | ((a << ((23u - p) & 31u)) & MANT_MASK_F32), a != 0u);
    // Exponent 31: Inf, or NaN with the quiet bit set.
    let special = (a << 13u) | EXP_MASK_F32 | select(0u, 0x00400000u, a > 0x7C00u);
    return s | select(select(normal, sub, a < 0x400u), special, a >= 0x7C00u);
}

// The two binary16 of `w` (low half first) as f32 bits.
fn f16x2_bits(w: u32) -> vec2<u32> {
    return vec2<u32>(f16_to_f32_bits(w & 0xFFFFu), f16_to_f32_bits(w >> 16u));
}

// Q5_1 (ggml id 7): 32 values in 24 bytes. Spec: formats.md §4.5. CPU twin: src/formats/legacy/q5_1.rs
// Thread mapping: as Q5_0, 4 invocations per block, 8 values each.
// y = q * d + m: the product of a code below 2^5 and an f16 value is exact in f32, so FMA
// contraction by a driver cannot change the result.

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 24u;
const Q5_1_D: u32 = 0u;    // f16 scale
const Q5_1_M: u32 = 2u;    // f16 min (offset)
const Q5_1_QH: u32 = 4u;   // u32 LE: bit k is the fifth bit of y[k]
const Q5_1_QS: u32 = 8u;   // 16 bytes of low 4 bits: low nibbles y[0..16], high nibbles y[16..32]

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, m, its values
// d * q + m (the min as m); dequant8 is its values.
const QPART8_MIN: bool = true;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let hb = (load_word(base + Q5_1_QH) >> (8u * part)) & 0xFFu;
    let at = base + Q5_1_QS + 8u * (part & 1u);
    let sh = 4u * (part >> 1u);
    let lo = ((load_word(at) >> sh) & 0x0F0F0F0Fu) | (spread4(hb) << 4u);
    let hi = ((load_word(at + 4u) >> sh) & 0x0F0F0F0Fu) | (spread4(hb >> 4u) << 4u);
    return qpart(lo, hi, f16_le(base + Q5_1_D), f16_le(base + Q5_1_M));
}

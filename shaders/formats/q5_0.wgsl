// Q5_0 (ggml id 6): 32 values in 22 bytes. Spec: formats.md §4.4. CPU twin: src/formats/legacy/q5_0.rs
// Thread mapping: as Q4_0, 4 invocations per block, 8 values each; value k of the block takes its
// fifth bit from bit k of qh, so part p uses qh bits 8p .. 8p+8. qh sits at byte 2 of a 22-byte
// block, so it is assembled from (up to) two tile words by load_u32.
// Exact on every GPU: (q - 16) * d is one multiply of an integer below 2^5 by an f16 value.

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 22u;
const Q5_0_D: u32 = 0u;    // f16 scale
const Q5_0_QH: u32 = 2u;   // u32 LE: bit k is the fifth bit of y[k]
const Q5_0_QS: u32 = 6u;   // 16 bytes of low 4 bits: low nibbles y[0..16], high nibbles y[16..32]

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); dequant8 is its values.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let hb = (load_u32(base + Q5_0_QH) >> (8u * part)) & 0xFFu;
    let at = base + Q5_0_QS + 8u * (part & 1u);
    let sh = 4u * (part >> 1u);
    let q = (load_u32x2(at) >> vec2<u32>(sh)) & vec2<u32>(0x0F0F0F0Fu);
    let lo = q.x | (spread4(hb) << 4u);
    let hi = q.y | (spread4(hb >> 4u) << 4u);
    let c = 0x10101010u;
    return qpart(sub_bytes(lo, c), sub_bytes(hi, c), f16_le(base + Q5_0_D), 0.0);
}

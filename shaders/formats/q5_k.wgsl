// Q5_K (ggml id 13): 256 values in 176 bytes. Spec: formats.md §4.12. CPU twin: src/formats/kquant/q5_k.rs
// Thread mapping (shared entry): as Q4_K, 32 invocations per super-block, 8 contiguous values
// each. Part p lies in sub-block j = p / 4 (scale and min unpacked once per invocation with
// get_scale_min_k4), reads the nibble j % 2 of qs[32 (j / 2) + 8 (p % 4) ..][+8] and, as the 5th
// bit, bit j of qh[8 (p % 4) ..][+8].
// y = (d * sc) * q - (dmin * m), in the CPU's order. Exact up to the final subtraction on every
// GPU: d and dmin are f16 (11 significant bits), sc, m < 2^6 and q < 2^5, so all three products
// are exact f32 values (at most 22 bits), never subnormal (nonzero f16 magnitudes are >= 2^-24)
// and never overflowing. A driver that contracts the subtraction into an fma gets the same
// correctly rounded result, and a difference of two multiples of 2^-24 is never an f32 subnormal.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 176u;
const Q5_K_D: u32 = 0u;        // f16 super-scale of the sub-block scales
const Q5_K_DMIN: u32 = 2u;     // f16 super-scale of the sub-block mins
const Q5_K_SCALES: u32 = 4u;   // 12 bytes, packed as Q4_K's (get_scale_min_k4)
const Q5_K_QH: u32 = 16u;      // 32 bytes: bit j of byte l is the 5th bit of y[32j + l]
const Q5_K_QS: u32 = 48u;      // 128 bytes: low 4 bits, arranged as Q4_K's qs

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, m, its values
// d * q + m (the min as m); dequant8 is its values.
const QPART8_MIN: bool = true;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let j = part >> 2u;
    let sm = get_scale_min_k4(j, base + Q5_K_SCALES);
    let d1 = f16_le(base + Q5_K_D) * f32(sm.x);
    let m1 = f16_le(base + Q5_K_DMIN) * f32(sm.y);
    let l = 8u * (part & 3u);
    let at = base + Q5_K_QS + 32u * (j >> 1u) + l;
    let hb = base + Q5_K_QH + l;
    let sh = 4u * (j & 1u);
    let lo = ((load_word(at) >> sh) & 0x0F0F0F0Fu) | (((load_word(hb) >> j) & 0x01010101u) << 4u);
    let hi = ((load_word(at + 4u) >> sh) & 0x0F0F0F0Fu) | (((load_word(hb + 4u) >> j) & 0x01010101u) << 4u);
    return qpart(lo, hi, d1, -m1);
}

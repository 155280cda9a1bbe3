// Q4_K (ggml id 12): 256 values in 144 bytes. Spec: formats.md §4.11. CPU twin: src/formats/kquant/q4_k.rs
// Thread mapping (shared entry): 32 invocations per super-block, 8 contiguous values each. Part p
// lies in sub-block j = p / 4 (32 values, one 6-bit scale and min, unpacked once per invocation
// with get_scale_min_k4) and reads qs[32 (j / 2) + 8 (p % 4) ..][+8]: low nibbles for even j,
// high nibbles for odd j.
// y = (d * sc) * q - (dmin * m), in the CPU's order. Exact up to the final subtraction on every
// GPU: d and dmin are f16 (11 significant bits), sc, m < 2^6 and q < 2^4, so d * sc (17 bits),
// (d * sc) * q (21 bits) and dmin * m (17 bits) are exact f32 products, neither subnormal
// (nonzero f16 magnitudes are >= 2^-24) nor overflowing (< 2^16 * 2^10). A driver that contracts
// the subtraction into fma((d * sc), q, -(dmin * m)) therefore gets the same correctly rounded
// result; and the difference of two multiples of 2^-24 is never an f32 subnormal.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 144u;
const Q4_K_D: u32 = 0u;        // f16 super-scale of the sub-block scales
const Q4_K_DMIN: u32 = 2u;     // f16 super-scale of the sub-block mins
const Q4_K_SCALES: u32 = 4u;   // 12 bytes: eight 6-bit scales and mins (get_scale_min_k4)
const Q4_K_QS: u32 = 16u;      // 128 bytes: 4 chunks of 32, low nibbles y[64c ..], high y[64c + 32 ..]

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
    let sm = get_scale_min_k4(j, base + Q4_K_SCALES);
    let d1 = f16_le(base + Q4_K_D) * f32(sm.x);
    let m1 = f16_le(base + Q4_K_DMIN) * f32(sm.y);
    let at = base + Q4_K_QS + 32u * (j >> 1u) + 8u * (part & 3u);
    let sh = 4u * (j & 1u);
    return qpart((load_word(at) >> sh) & 0x0F0F0F0Fu, (load_word(at + 4u) >> sh) & 0x0F0F0F0Fu, d1, -m1);
}

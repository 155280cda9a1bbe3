// Q2_K (ggml id 10): 256 values in 84 bytes. Spec: formats.md §4.9. CPU twin: src/formats/kquant/q2_k.rs
// Thread mapping (shared entry): 32 invocations per super-block, 8 contiguous values each. Part p
// covers y[8p ..][+8] = half h = p / 16, 2-bit field g = (p / 4) % 4, l = 8 (p % 4) .. l + 8: bits
// 2g .. 2g + 2 of qs[32h + l ..], with the one scale byte scales[p / 2] (16 values each).
// y = (d * (s & 0xF)) * q - (dmin * (s >> 4)), in the CPU's order. Exact up to the final
// subtraction on every GPU: d and dmin are f16 (11 significant bits), the codes are below 2^4 and
// q below 2^2, so all three products are exact f32 values (at most 17 bits), never subnormal
// (nonzero f16 magnitudes are >= 2^-24) and never overflowing. A driver that contracts the
// subtraction into an fma gets the same correctly rounded result, and a difference of two
// multiples of 2^-24 is never an f32 subnormal.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 84u;
const Q2_K_SCALES: u32 = 0u;   // 16 bytes: low nibble scale code, high nibble min code, per 16 values
const Q2_K_QS: u32 = 16u;      // 64 bytes: 2-bit codes, four values 32 apart per byte (per half)
const Q2_K_D: u32 = 80u;       // f16 super-scale of the scales
const Q2_K_DMIN: u32 = 82u;    // f16 super-scale of the mins

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, m, its values
// d * q + m (the min as m); dequant8 is its values.
const QPART8_MIN: bool = true;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (a scale per 16 values).
const QPART8_GROUP: u32 = 2u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let s = load_u8(base + Q2_K_SCALES + (part >> 1u));
    let dl = f16_le(base + Q2_K_D) * f32(s & 0xFu);
    let ml = f16_le(base + Q2_K_DMIN) * f32(s >> 4u);
    let at = base + Q2_K_QS + 32u * (part >> 4u) + 8u * (part & 3u);
    let sh = 2u * ((part >> 2u) & 3u);
    return qpart((load_word(at) >> sh) & 0x03030303u, (load_word(at + 4u) >> sh) & 0x03030303u, dl, -ml);
}

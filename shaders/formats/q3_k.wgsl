// Q3_K (ggml id 11): 256 values in 110 bytes. Spec: formats.md §4.10. CPU twin: src/formats/kquant/q3_k.rs
// Thread mapping (shared entry): 32 invocations per super-block, 8 contiguous values each. Part p
// covers y[8p ..][+8] = half h = p / 16, 2-bit field g = (p / 4) % 4, l = 8 (p % 4) .. l + 8: bits
// 2g .. 2g + 2 of qs[32h + l ..] and bit 4h + g of hmask[l ..], with the one 6-bit scale S[p / 2]
// (16 values each), unpacked once per invocation by q3_k_scale.
// y = (d * S) * q with q = lo2 - (hbit ? 0 : 4), in the CPU's order. Exact on every GPU: d is f16
// (11 significant bits), |S| <= 32 and |q| <= 4, so both products are exact f32 values (at most
// 19 bits), never subnormal (nonzero f16 magnitudes are >= 2^-24) and never overflowing; there is
// no addition a driver could fuse.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 110u;
const Q3_K_HMASK: u32 = 0u;    // 32 bytes: the high bit of each code, bit 4h + g of byte l
const Q3_K_QS: u32 = 32u;      // 64 bytes: low 2 bits, arranged as Q2_K's qs
const Q3_K_SCALES: u32 = 96u;  // 12 bytes: sixteen 6-bit signed scales, packed
const Q3_K_D: u32 = 108u;      // f16 super-scale

// Scale j (0..16) of the 12 packed bytes K at tile offset `k`, -32..31 (the CPU's unpack_scales):
// low4 = (j < 8 ? K[j] & 0xF : K[j-8] >> 4), high2 = (K[8 + j % 4] >> 2 (j / 4)) & 3.
fn q3_k_scale(k: u32, j: u32) -> i32 {
    let low4 = (load_u8(k + (j & 7u)) >> (4u * (j >> 3u))) & 0xFu;
    let high2 = (load_u8(k + 8u + (j & 3u)) >> (2u * (j >> 2u))) & 3u;
    return i32(low4 | (high2 << 4u)) - 32;
}

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); dequant8 is its values.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (a scale per 16 values).
const QPART8_GROUP: u32 = 2u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let dl = f16_le(base + Q3_K_D) * f32(q3_k_scale(base + Q3_K_SCALES, part >> 1u));
    let h = part >> 4u;
    let g = (part >> 2u) & 3u;
    let l = 8u * (part & 3u);
    let at = base + Q3_K_QS + 32u * h + l;
    let hm = base + Q3_K_HMASK + l;
    let sh = 2u * g;
    let hs = 4u * h + g;
    let q = ((load_u32x2(at) >> vec2<u32>(sh)) & vec2<u32>(0x03030303u))
        | (((load_u32x2(hm) >> vec2<u32>(hs)) & vec2<u32>(0x01010101u)) << vec2<u32>(2u));
    let lo = q.x;
    let hi = q.y;
    let c = 0x04040404u;
    return qpart(sub_bytes(lo, c), sub_bytes(hi, c), dl, 0.0);
}

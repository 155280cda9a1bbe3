// Q6_K (ggml id 14): 256 values in 210 bytes. Spec: formats.md §4.13. CPU twin: src/formats/kquant/q6_k.rs
// Thread mapping (shared entry): 32 invocations per super-block, 8 contiguous values each. Part p
// covers y[8p ..][+8] = half h = p / 16, quad = (p / 4) % 4, l = 8 (p % 4) .. l + 8: the low
// nibbles (quad < 2) or high nibbles (quad >= 2) of ql[64h + 32 (quad % 2) + l ..], bits
// 2 quad .. 2 quad + 2 of qh[32h + l ..], and the one int8 scale scales[p / 2] (16 values each).
// y = (d * sc) * q with q = (lo4 | hi2 << 4) - 32, in the CPU's order. Exact on every GPU: d is
// f16 (11 significant bits), |sc| <= 128 (7 bits, or the power 2^7) and |q| <= 32 (5 bits, or 2^5),
// so both products are exact f32 values (at most 23 bits), never subnormal (nonzero f16 magnitudes
// are >= 2^-24) and never overflowing; there is no addition a driver could fuse.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 210u;
const Q6_K_QL: u32 = 0u;        // 128 bytes: low 4 bits
const Q6_K_QH: u32 = 128u;      // 64 bytes: high 2 bits, four codes 32 apart per byte
const Q6_K_SCALES: u32 = 192u;  // int8[16]: one signed scale per 16 values
const Q6_K_D: u32 = 208u;       // f16 super-scale

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); dequant8 is its values.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (a scale per 16 values).
const QPART8_GROUP: u32 = 2u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let h = part >> 4u;
    let quad = (part >> 2u) & 3u;
    let l = 8u * (part & 3u);
    let sc = sbytes4(load_u8(base + Q6_K_SCALES + (part >> 1u))).x;
    let dl = f16_le(base + Q6_K_D) * f32(sc);
    let ql = base + Q6_K_QL + 64u * h + 32u * (quad & 1u) + l;
    let qh = base + Q6_K_QH + 32u * h + l;
    let sl = 4u * (quad >> 1u);
    let shh = 2u * quad;
    let q = ((load_u32x2(ql) >> vec2<u32>(sl)) & vec2<u32>(0x0F0F0F0Fu))
        | (((load_u32x2(qh) >> vec2<u32>(shh)) & vec2<u32>(0x03030303u)) << vec2<u32>(4u));
    let lo = q.x;
    let hi = q.y;
    let c = 0x20202020u;
    return qpart(sub_bytes(lo, c), sub_bytes(hi, c), dl, 0.0);
}

// TQ2_0 (ggml id 35): 256 values in 66 bytes. Spec: formats.md §4.24. CPU twin: src/formats/ternary/tq2_0.rs
// Thread mapping (shared entry): 32 invocations per super-block, 8 contiguous values each. Part p
// covers y[8p ..][+8] = chunk c = p / 16, bit pair s = (p / 4) % 4, m = 8 (p % 4) .. m + 8: bits
// 2s .. 2s + 2 of qs[32c + m ..].
// y = (code - 1) * d: one multiply of -1, 0, 1 or 2 by an f16 value, exact on every GPU.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 66u;
const TQ2_0_QS: u32 = 0u;   // 64 bytes: four 2-bit codes per byte, values 32 apart per 128-value chunk
const TQ2_0_D: u32 = 64u;   // f16 scale

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); dequant8 is its values.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let at = base + TQ2_0_QS + 32u * (part >> 4u) + 8u * (part & 3u);
    let sh = 2u * ((part >> 2u) & 3u);
    let c = 0x01010101u;
    let q = (load_u32x2(at) >> vec2<u32>(sh)) & vec2<u32>(0x03030303u);
    return qpart(sub_bytes(q.x, c), sub_bytes(q.y, c), f16_le(base + TQ2_0_D), 0.0);
}

// Q2_0 (ggml id 42): 64 values in 18 bytes. Spec: formats.md §4.28. CPU twin: src/formats/legacy/q2_0.rs
// Thread mapping: 8 invocations per block, 8 values each: part p takes the 2-bit codes of
// qs[2p] and qs[2p+1], LSB first (4 consecutive values per byte). y = (q - 1) * d, exact.

const BLOCK_ELEMS: u32 = 64u;
const BLOCK_BYTES: u32 = 18u;
const Q2_0_D: u32 = 0u;    // f16 scale
const Q2_0_QS: u32 = 2u;   // 16 bytes of 2-bit codes, y[j] = bits 2(j%4) .. of qs[j / 4]

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let d = f16_le(base + Q2_0_D);
    let w = load_u16(base + Q2_0_QS + 2u * part);
    let lo = (vec4<u32>(w) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u);
    let hi = (vec4<u32>(w) >> vec4<u32>(8u, 10u, 12u, 14u)) & vec4<u32>(3u);
    let one = vec4<i32>(1);
    return bits8(vec4<f32>(vec4<i32>(lo) - one) * d, vec4<f32>(vec4<i32>(hi) - one) * d);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); the same fields as dequant8.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let w = load_u16(base + Q2_0_QS + 2u * part);
    let lo = (vec4<u32>(w) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u);
    let hi = (vec4<u32>(w) >> vec4<u32>(8u, 10u, 12u, 14u)) & vec4<u32>(3u);
    let one = vec4<i32>(1);
    return qpart(pack_i8(vec4<i32>(lo) - one), pack_i8(vec4<i32>(hi) - one), f16_le(base + Q2_0_D), 0.0);
}

// Q1_0 (ggml id 41): 128 values in 18 bytes. Spec: formats.md §4.27. CPU twin: src/formats/legacy/q1_0.rs
// Thread mapping: 16 invocations per block, 8 values each: part p takes the 8 bits of qs[p],
// LSB first. y = bit ? d : -d (a negation, exact).

const BLOCK_ELEMS: u32 = 128u;
const BLOCK_BYTES: u32 = 18u;
const Q1_0_D: u32 = 0u;    // f16 scale
const Q1_0_QS: u32 = 2u;   // 16 bytes of sign bits, y[j] = bit j % 8 of qs[j / 8]

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let d = f16_le(base + Q1_0_D);
    let b = load_u8(base + Q1_0_QS + part);
    let pos = vec4<f32>(d);
    let neg = vec4<f32>(-d);
    let one = vec4<u32>(1u);
    return bits8(select(neg, pos, bits4(b, 0u) == one), select(neg, pos, bits4(b, 4u) == one));
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); the same fields as dequant8.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let b = load_u8(base + Q1_0_QS + part);
    // 2 * bit - 1 per byte.
    let c = 0x01010101u;
    return qpart(sub_bytes(spread4(b) << 1u, c), sub_bytes(spread4(b >> 4u) << 1u, c), f16_le(base + Q1_0_D), 0.0);
}

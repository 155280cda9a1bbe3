// Q8_0 (ggml id 8): 32 values in 34 bytes. Spec: formats.md §4.6. CPU twin: src/formats/legacy/q8_0.rs
// Thread mapping: 4 invocations per block, 8 values each: part p takes qs[8p .. 8p+8].
// Exact on every GPU: int8 * d is one multiply of an integer below 2^8 by an f16 value.

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 34u;
const Q8_0_D: u32 = 0u;    // f16 scale
const Q8_0_QS: u32 = 2u;   // int8[32]

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); dequant8 is its values.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let at = base + Q8_0_QS + 8u * part;
    let q = load_u32x2(at);
    return qpart(q.x, q.y, f16_le(base + Q8_0_D), 0.0);
}

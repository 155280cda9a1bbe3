// Q4_0 (ggml id 2): 32 values in 18 bytes. Spec: formats.md §4.2. CPU twin: src/formats/legacy/q4_0.rs
// Thread mapping: 4 invocations per block, 8 values each. Part p takes qs[8(p%2) .. 8(p%2)+8]:
// its low nibbles for p < 2 (y[8p ..]), its high nibbles for p >= 2 (y[16 + 8(p-2) ..]).
// Exact on every GPU: (q - 8) * d is one multiply of an integer below 2^4 by an f16 value.

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 18u;
const Q4_0_D: u32 = 0u;    // f16 scale
const Q4_0_QS: u32 = 2u;   // 16 bytes: low nibbles y[0..16], high nibbles y[16..32]

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return qpart_values(qpart8(base, part), QPART8_MIN);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); dequant8 is its values.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let d = f16_le(base + Q4_0_D);
    let at = base + Q4_0_QS + 8u * (part & 1u);
    let sh = 4u * (part >> 1u);
    let c = 0x08080808u;
    let q = (load_u32x2(at) >> vec2<u32>(sh)) & vec2<u32>(0x0F0F0F0Fu);
    return qpart(sub_bytes(q.x, c), sub_bytes(q.y, c), d, 0.0);
}

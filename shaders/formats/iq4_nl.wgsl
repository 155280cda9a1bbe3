// IQ4_NL (ggml id 20): 32 values in 18 bytes. Spec: formats.md §4.21. CPU twin: src/formats/iquant/iq4_nl.rs
// Thread mapping: as Q4_0, 4 invocations per block, 8 values each; codes index KVALUES_IQ4NL.
// Exact on every GPU: d * kvalue is one multiply of an integer below 2^7 by an f16 value.

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 18u;
const IQ4_NL_D: u32 = 0u;    // f16 scale
const IQ4_NL_QS: u32 = 2u;   // 16 bytes: low nibbles y[0..16], high nibbles y[16..32]
const KVALUES: vec4<u32> = KVALUES_IQ4NL; // the codes' table (lib/lookup.wgsl)

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let d = f16_le(base + IQ4_NL_D);
    let at = base + IQ4_NL_QS + 8u * (part & 1u);
    let sh = 4u * (part >> 1u);
    let q = (load_u32x2(at) >> vec2<u32>(sh)) & vec2<u32>(0x0F0F0F0Fu);
    let lo = lookup4_f32(bytes4(q.x));
    let hi = lookup4_f32(bytes4(q.y));
    return bits8(d * lo, d * hi);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); the same fields as dequant8.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let at = base + IQ4_NL_QS + 8u * (part & 1u);
    let sh = 4u * (part >> 1u);
    let q = (load_u32x2(at) >> vec2<u32>(sh)) & vec2<u32>(0x0F0F0F0Fu);
    let lo = lookup4_i8(bytes4(q.x));
    let hi = lookup4_i8(bytes4(q.y));
    return qpart(lo, hi, f16_le(base + IQ4_NL_D), 0.0);
}

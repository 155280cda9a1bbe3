// F8_E4M3 (ggml id 43): 1 value in 1 bytes. Spec: formats.md §2.6 and §5. CPU twin: src/formats/float/f8_e4m3.rs
// Thread mapping: 8 consecutive values per invocation, read as two u32 words; each byte is
// widened to f32 bits with integer operations (OCP E4M3FN: 0x7F and 0xFF are NaN).

const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 1u;

fn e4m3x4(w: u32) -> vec4<u32> {
    let b = bytes4(w);
    return vec4<u32>(e4m3_to_f32_bits(b.x), e4m3_to_f32_bits(b.y), e4m3_to_f32_bits(b.z), e4m3_to_f32_bits(b.w));
}

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let q = load_u32x2(base);
    return array<vec4<u32>, 2>(e4m3x4(q.x), e4m3x4(q.y));
}

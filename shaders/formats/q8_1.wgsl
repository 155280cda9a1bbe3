// Q8_1 (ggml id 9): 32 values in 36 bytes. Spec: formats.md §4.7. CPU twin: src/formats/legacy/q8_1.rs
// Thread mapping: as Q8_0, 4 invocations per block, 8 values each. `s` (d times the sum of qs,
// kept for dot products) is not read: y = int8 * d.

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 36u;
const Q8_1_D: u32 = 0u;    // f16 scale
const Q8_1_S: u32 = 2u;    // f16 d * sum(qs), unused by the decode
const Q8_1_QS: u32 = 4u;   // int8[32]

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let d = f16_le(base + Q8_1_D);
    let at = base + Q8_1_QS + 8u * part;
    return bits8(vec4<f32>(sbytes4(load_word(at))) * d, vec4<f32>(sbytes4(load_word(at + 4u))) * d);
}

// F16 (ggml id 1): 1 value in 2 bytes. Spec: formats.md §4.1. CPU twin: src/formats/float/f16.rs
// Thread mapping: 8 consecutive values per invocation, read as four u32 words (a tensor may start
// at an odd half-word: load_u32x4 handles the skew), widened to f32 bits by half.wgsl's f16x2_bits
// (dequant8_words: also the matvec kernels' reader of aligned rows, one vec4 load per 8 values).

const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 2u;

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    return dequant8_words(load_u32x4(base));
}

// The 8 values of four little-endian words, as f32 bits.
fn dequant8_words(q: vec4<u32>) -> array<vec4<u32>, 2> {
    let a = f16x2_bits(q.x);
    let b = f16x2_bits(q.y);
    let c = f16x2_bits(q.z);
    let d = f16x2_bits(q.w);
    return array<vec4<u32>, 2>(vec4<u32>(a, b), vec4<u32>(c, d));
}

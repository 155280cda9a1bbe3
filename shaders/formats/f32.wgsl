// F32 (ggml id 0): 1 value in 4 bytes. Spec: formats.md §4.1. CPU twin: src/formats/float/f32.rs
// Thread mapping: 8 consecutive values per invocation (64 per workgroup), copied as bits: no float
// operation touches them, so NaN payloads and subnormals pass through unchanged.

const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 4u;

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let w = base >> 2u;   // F32 blocks are word-aligned: the skew is 0
    return array<vec4<u32>, 2>(
        vec4<u32>(tile[w], tile[w + 1u], tile[w + 2u], tile[w + 3u]),
        vec4<u32>(tile[w + 4u], tile[w + 5u], tile[w + 6u], tile[w + 7u]),
    );
}

// Helpers of the 256-value k-quant super-block formats (composed only into the shaders that name
// `lib ["kquant"]` in src/gpu/shaders.rs). CPU twin: get_scale_min_k4 in src/formats/common.rs.

// ggml's get_scale_min_k4 (spec §4.11): the 6-bit (scale, min) of sub-block `j` (0..8) as (x, y),
// from the 12 packed bytes K at tile offset `k` of a Q4_K / Q5_K block:
//     j < 4:  sc = K[j] & 63,                        m = K[j+4] & 63
//     j >= 4: sc = (K[j+4] & 0xF) | (K[j-4] >> 6) << 4, m = (K[j+4] >> 4) | (K[j] >> 6) << 4
// Branch-free: with i = j % 4, a = K[i], b = K[i+4], c = K[i+8] are K[j], K[j+4] for j < 4 and
// K[j-4], K[j], K[j+4] for j >= 4, so both cases come from the same three bytes.
fn get_scale_min_k4(j: u32, k: u32) -> vec2<u32> {
    let sh = 8u * (j & 3u);
    let ab = (vec2<u32>(load_word(k), load_word(k + 4u)) >> vec2<u32>(sh)) & vec2<u32>(0xFFu);
    let c = (load_word(k + 8u) >> sh) & 0xFFu;
    let low = ab & vec2<u32>(63u);
    let high = vec2<u32>(c & 0xFu, c >> 4u) | ((ab >> vec2<u32>(6u)) << vec2<u32>(4u));
    return select(high, low, j < 4u);
}

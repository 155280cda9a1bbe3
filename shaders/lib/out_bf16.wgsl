// Output: little-endian bf16, round to nearest even from the f32 bits (integer operations, no
// pack2x16float), two values per u32 word and one vec4 (8 values) per invocation.
// CPU twin: cpu::dequant_to_bytes with DType::BF16.

fn pack_pair(lo: u32, hi: u32) -> u32 {
    return f32_bits_to_bf16(lo) | (f32_bits_to_bf16(hi) << 16u);
}

fn store8(first: u32, v: array<vec4<u32>, 2>, avail: u32) {
    let w = vec4<u32>(
        pack_pair(v[0].x, v[0].y),
        pack_pair(v[0].z, v[0].w),
        pack_pair(v[1].x, v[1].y),
        pack_pair(v[1].z, v[1].w),
    );
    let q = first >> 3u;
    if (avail >= 8u) {
        dst[q] = w;
        return;
    }
    // Ragged tail (one-value formats only): merge the valid halves into the existing word, which
    // this invocation alone owns; the halves past the end are written back unchanged.
    var cur = dst[q];
    for (var j = 0u; j < avail; j++) {
        let mask = 0xFFFFu << ((j & 1u) * 16u);
        cur[j >> 1u] = (cur[j >> 1u] & ~mask) | (w[j >> 1u] & mask);
    }
    dst[q] = cur;
}

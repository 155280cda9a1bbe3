// Output of 16-bit values (f16 or bf16): `pack_pair` from out_f16.wgsl or out_bf16.wgsl packs two
// f32 bit patterns into one u32 word; one vec4 (8 values) per invocation.

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

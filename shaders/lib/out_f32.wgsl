// Output: little-endian f32, two vec4 words per invocation (the f32 bits pass through untouched).
// CPU twin: cpu::dequant_to_bytes with DType::F32.

fn store8(first: u32, v: array<vec4<u32>, 2>, avail: u32) {
    let q = first >> 2u;
    if (avail >= 8u) {
        dst[q] = v[0];
        dst[q + 1u] = v[1];
        return;
    }
    // Ragged tail (one-value formats only): this invocation alone owns these two vec4 words;
    // the words past the end are written back unchanged.
    var vals = v;
    for (var k = 0u; k < 2u; k++) {
        if (avail > 4u * k) {
            var w = dst[q + k];
            for (var j = 0u; j < 4u; j++) {
                if (4u * k + j < avail) {
                    w[j] = vals[k][j];
                }
            }
            dst[q + k] = w;
        }
    }
}

// The chunks of precision `factored` (ops::mul_mat_factored), as llama.cpp sums: a Chunk is the
// format's qpart8 of 8 values d * q + m (lib/int8.wgsl: the two words of int8 codes q, then d
// and m as f32 bits), and its dot with x is d * Σ q x + m * Σ x in f32, the scales taken out of
// the inner sums (the second product only for formats with QPART8_MIN). The same interface as
// chunk_exact.wgsl; only formats with a qpart8 (blocks of 32 values or more, so no ragged end)
// are composed with it.

alias Chunk = vec4<u32>;
// What x8 reads: a chunk's 8 values of x.
alias XChunk = array<vec4<f32>, 2>;

// Chunk c (values 8c .. 8c + 8) of the row at byte `row_base`.
fn chunk(row_base: u32, c: u32) -> Chunk {
    let parts = w_BLOCK_ELEMS / 8u;
    return w_qpart8(row_base + (c / parts) * w_BLOCK_BYTES, c % parts);
}

// Part p (values 8p .. 8p + 8) of the block at byte `base`.
fn part_chunk(base: u32, p: u32) -> Chunk {
    return w_qpart8(base, p);
}

// d * Σ q·x + m * Σ x over the chunk's 8 values.
fn chunk_dot(v: Chunk, xs: array<vec4<f32>, 2>) -> f32 {
    if (w_QPART8_MIN) {
        // Unsigned codes below 128 (lib/int8.wgsl): read as unsigned bytes, no sign extension.
        let s = dot(vec4<f32>(w_bytes4(v.x)), xs[0]) + dot(vec4<f32>(w_bytes4(v.y)), xs[1]);
        let sx = dot(xs[0], vec4<f32>(1.0)) + dot(xs[1], vec4<f32>(1.0));
        return bitcast<f32>(v.z) * s + bitcast<f32>(v.w) * sx;
    }
    let s = dot(vec4<f32>(w_sbytes4(v.x)), xs[0]) + dot(vec4<f32>(w_sbytes4(v.y)), xs[1]);
    return bitcast<f32>(v.z) * s;
}

// Block formats have no ragged end: every lane is inside the row.
fn chunk_dot_tail(v: Chunk, xs: array<vec4<f32>, 2>, m: array<vec4<bool>, 2>) -> f32 {
    return chunk_dot(v, xs);
}

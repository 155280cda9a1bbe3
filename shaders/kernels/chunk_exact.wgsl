// The chunks of precision `exact` (ops::mul_mat): a Chunk is 8 weight values decoded to f32 by
// the format's own dequant8 (bit-exact with the CPU codec), dotted with x in f32. Composed by
// src/gpu/kernels/compose.rs after rows.wgsl, before row_dot.wgsl or matvec_rows.wgsl;
// chunk_factored.wgsl is the same interface for precision `factored`.

alias Chunk = array<vec4<f32>, 2>;
// What x8 reads: a chunk's 8 values of x.
alias XChunk = array<vec4<f32>, 2>;

// Chunk c (values 8c .. 8c + 8) of the row at byte `row_base`.
fn chunk(row_base: u32, c: u32) -> Chunk {
    return chunk8(row_base, c);
}

// Part p (values 8p .. 8p + 8) of the block at byte `base`.
fn part_chunk(base: u32, p: u32) -> Chunk {
    let raw = w_dequant8(base, p);
    return Chunk(bitcast<vec4<f32>>(raw[0]), bitcast<vec4<f32>>(raw[1]));
}

// Σ v·x over the chunk's 8 values.
fn chunk_dot(v: Chunk, xs: array<vec4<f32>, 2>) -> f32 {
    return dot(v[0], xs[0]) + dot(v[1], xs[1]);
}

// chunk_dot over the lanes `m` inside the row (the ragged end of a one-value format's row: NaN
// and infinity outside are masked by select, never multiplied by zero).
fn chunk_dot_tail(v: Chunk, xs: array<vec4<f32>, 2>, m: array<vec4<bool>, 2>) -> f32 {
    return dot(select(vec4<f32>(0.0), v[0], m[0]), xs[0])
        + dot(select(vec4<f32>(0.0), v[1], m[1]), xs[1]);
}

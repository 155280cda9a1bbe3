// The chunks of precision `int8` on the rows mapping (ops::mul_mat_int_dot), as llama.cpp's mmvq:
// a Chunk is the format's qpart8 of 8 values d * q + m (lib/int8.wgsl: the two words of int8
// codes q, then d and m as f32 bits), and x is not f32 values but its int8 codes and scales,
// written once per call by quantize_q8.wgsl into the recorder's scratch buffer: for column b
// (0 .. B) and value i (0 .. K, K a multiple of 32), byte i % 4 of word b * K / 4 + i / 4, and
// the scale dx of values 32j .. 32j + 32 at word B * K / 4 + b * K / 32 + j (f32 bits), their
// sums of codes at word B * K / 4 + B * K / 32 + b * K / 32 + j (Σq of values 0..16 and 16..32
// of the block as the low and high i16; slot_dot's min term for slots of several chunks). A chunk's
// dot with x is dx * (d * Σ q xq + m * Σ xq) (the second product only for formats with
// QPART8_MIN), the integer dots exact through dot4I8Packed: matvec_q8.wgsl's sum of a part. The
// same interface as chunk_exact.wgsl, with the x reader in place of x_scalar.wgsl and
// x_tail.wgsl; composed by src/gpu/kernels/family/matvec.rs before matvec_rows.wgsl.

@group(0) @binding(1) var<storage, read> x: array<u32>;

alias Chunk = vec4<u32>;
// What x8 reads: two words of codes, the scale's bits.
alias XChunk = vec3<u32>;

// Chunk c (values 8c .. 8c + 8) of the row at byte `row_base`.
fn chunk(row_base: u32, c: u32) -> Chunk {
    let parts = w_BLOCK_ELEMS / 8u;
    return w_qpart8(row_base + (c / parts) * w_BLOCK_BYTES, c % parts);
}

// Part p (values 8p .. 8p + 8) of the block at byte `base`.
fn part_chunk(base: u32, p: u32) -> Chunk {
    return w_qpart8(base, p);
}

// x's codes of values o .. o + 8 (o = x_skip + 8c + b K, as the kernel reads f32 x; the codes
// start at word 0 whatever x's offset) and their scale: two words of codes, the scale's bits.
fn x8(o: u32) -> vec3<u32> {
    let v = o - params.x_skip;
    let w = v / 4u;
    return vec3<u32>(x[w], x[w + 1u], x[B * (params.k / 4u) + v / 32u]);
}

// dx * (d * Σ q xq + m * Σ xq) over the chunk's 8 values.
fn chunk_dot(v: Chunk, xs: vec3<u32>) -> f32 {
    var s = bitcast<f32>(v.z) * f32(dot4I8Packed(v.x, xs.x) + dot4I8Packed(v.y, xs.y));
    if (w_QPART8_MIN) {
        let ones = 0x01010101u;
        s += bitcast<f32>(v.w) * f32(dot4I8Packed(ones, xs.x) + dot4I8Packed(ones, xs.y));
    }
    return bitcast<f32>(xs.z) * s;
}

// Block formats have no ragged end: every chunk is inside the row.
fn x8_tail(o: u32, c: u32, k: u32) -> vec3<u32> {
    return x8(o);
}

fn chunk_dot_tail(v: Chunk, xs: vec3<u32>, m: array<vec4<bool>, 2>) -> f32 {
    return chunk_dot(v, xs);
}

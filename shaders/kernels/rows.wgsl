// Row access of the inference kernels (composed after the weight's decode module, prefix `w_`,
// blocks binding `w`; see src/gpu/decode.rs). A weight row is K values in whole blocks, its bytes
// contiguous from `row_base`; chunk c is values 8c .. 8c + 8 of the row.
// CPU twin: the row slicing of src/ops.rs.

// The f32 values 8c .. 8c + 8 of the row at byte `row_base`. One-value formats (w_BLOCK_ELEMS = 1)
// decode the 8 consecutive elements (one_value8, composed before this file by compose.rs: the
// format's dequant8, or one vec4 load for F16 and BF16 rows of whole 16-byte chunks); the others
// one 8-value part of one block.
fn chunk8(row_base: u32, c: u32) -> array<vec4<f32>, 2> {
    var v: array<vec4<u32>, 2>;
    if (w_BLOCK_ELEMS == 1u) {
        v = one_value8(row_base + 8u * c * w_BLOCK_BYTES);
    } else {
        let parts = max(w_BLOCK_ELEMS / 8u, 1u); // (never 0: the branch above is const-folded late)
        v = w_dequant8(row_base + (c / parts) * w_BLOCK_BYTES, c % parts);
    }
    return array<vec4<f32>, 2>(bitcast<vec4<f32>>(v[0]), bitcast<vec4<f32>>(v[1]));
}

// Lanes of chunk c that lie inside a row of k values (all of them unless c is the last chunk of a
// one-value format's row whose length is not a multiple of 8).
fn chunk_mask(c: u32, k: u32) -> array<vec4<bool>, 2> {
    let first = vec4<u32>(8u * c) + vec4<u32>(0u, 1u, 2u, 3u);
    return array<vec4<bool>, 2>(first < vec4<u32>(k), first + vec4<u32>(4u) < vec4<u32>(k));
}

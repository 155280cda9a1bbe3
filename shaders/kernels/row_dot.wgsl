// The f32 row dot of the matvec kernels (matvec.wgsl): x as f32 values, each 8-value chunk of a
// weight row read by the precision's chunk file (chunk_exact.wgsl: decoded by the format's
// dequant8; chunk_factored.wgsl: the format's qpart8) through `chunk`, or block_dot's part_dot
// and group_dot, and dotted with x through the composed x reader. The integer path replaces
// this file with matvec_q8.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;

// Adds part p of the block at byte `base` times x[b][at + 8p ..] (stride k) to acc[b].
fn part_dot(acc: ptr<function, array<f32, B>>, base: u32, p: u32, at: u32, k: u32) {
    let v = part_chunk(base, p);
    for (var b = 0u; b < B; b++) {
        (*acc)[b] += chunk_dot(v, x8(at + 8u * p + b * k));
    }
}

// Σ_k W[row, k] x[b][k] for the B columns of x from index `x_at` (stride k), for the row at byte
// `row_base`: this invocation's chunks (t, t + T, ...) reduced over the row's T invocations and
// returned to its invocation t = 0. Called in uniform control flow by every invocation of the
// workgroup, each with a row that exists.
fn row_dot(t: u32, lid: u32, row_base: u32, x_at: u32) -> array<f32, B> {
    let k = params.k;
    var acc: array<f32, B>;
    if (T == 1u && w_BLOCK_ELEMS >= 8u) {
        // One invocation per row: block by block, each through block_dot (composed in: the
        // block's parts in straight-line code, so the compiler can share what they decode alike).
        let n_blocks = k / w_BLOCK_ELEMS;
        for (var blk = 0u; blk < n_blocks; blk++) {
            block_dot(&acc, row_base + blk * w_BLOCK_BYTES, x_at + blk * w_BLOCK_ELEMS, k);
        }
        return acc;
    }
    let n_chunks = (k + 7u) / 8u;
    var c = t;
    if (U > 1u) {
        // U of this invocation's chunks per step (c, c + T, ...; all inside the row), every one
        // decoded before any is summed, so that their loads are in flight together; added in
        // the order of the loop below, so the sums are its sums.
        let whole = k / 8u;
        for (; c + (U - 1u) * T < whole; c += U * T) {
            var v: array<Chunk, U>;
            for (var u = 0u; u < U; u++) {
                v[u] = chunk(row_base, c + u * T);
            }
            for (var u = 0u; u < U; u++) {
                let at = x_at + 8u * (c + u * T);
                for (var b = 0u; b < B; b++) {
                    acc[b] += chunk_dot(v[u], x8(at + b * k));
                }
            }
        }
    }
    for (; c < n_chunks; c += T) {
        let v = chunk(row_base, c);
        let at = x_at + 8u * c;
        if (8u * c + 8u <= k) {
            for (var b = 0u; b < B; b++) {
                acc[b] += chunk_dot(v, x8(at + b * k));
            }
        } else {
            // The ragged end of a one-value format's row: only the lanes inside it.
            let m = chunk_mask(c, k);
            for (var b = 0u; b < B; b++) {
                acc[b] += chunk_dot_tail(v, x8_tail(at + b * k, c, k), m);
            }
        }
    }
    if (T == 1u) {
        return acc;
    }
    return reduce_row(acc, t, lid);
}


// Matrix-vector products for GPUs: y = W x for B (1..8) columns, the rows mapping. Composed by
// src/gpu/kernels/family/matvec.rs after the variant's constants, B (columns), WG (invocations
// per workgroup: 32..256), R (rows per workgroup: 1..8), S (chunks per slot: 1, 2 or 4; R * S at
// most 8) and U (slots of each row per unrolled loop step: 1 to 4),
// the weight's decode module, rows.wgsl, the precision's chunk file and slot_chunks (chunk_exact.wgsl,
// chunk_factored.wgsl or chunk_int8.wgsl: what a chunk is and its dot with x), the x binding
// and reader (`x: array<f32>` with x_scalar.wgsl, or x_vec4.wgsl when K is a multiple of 4 and x
// 16-byte aligned, and x_tail.wgsl; chunk_int8.wgsl has its own: x's int8 codes) and the
// workgroup reduction (reduce_rows_subgroup.wgsl or reduce_rows_tree.wgsl). Replaces
// matvec.wgsl's entry `matvec` for this variant.
// CPU twin: ops::mul_mat (f64), within the bound of the precision (ops::reference_in; any order
// of the sums).
//
// Thread mapping (as llama.cpp's mul_mat_vec): all WG invocations of a workgroup work on all R
// rows. A row is cut into slots of S 8-value chunks; invocation i takes slots i, i + WG, ... of
// every row (chunks S i .. S i + S, ...), so the workgroup reads each row's bytes front to back in
// WG-slot strides. A slot lies in one block (every block format has a multiple of 4 parts), so
// its chunks share their block's and sub-block's scales, decoded once for the slot where the
// compiler sees it: slot_chunks (composed before this file by family/matvec.rs) decodes the
// slot's chunks in straight-line code, with the block named once (in a loop, each chunk would
// sit behind the loop-bounding check wgpu adds to every loop, and nothing would be shared). The
// invocation reads a slot's x once per column (slot_x, composed with slot_chunks) and uses it
// for the R rows (classic matvec.wgsl reads it once per row), and decodes the R rows' chunks of
// U slots before it sums any, so their loads are in flight together: rows_step_u (U slots) and
// rows_step_1 (one), written out per variant by family/matvec.rs, for the reason slot_chunks is
// (looped, navi31 took 5.7 instructions per F16 weight; written out, as with no bounding, 2.1). slot_dot adds a slot's
// chunks to a sum: one by one in chunk order (chunk_dot), or for int8 slots of several chunks
// as llama.cpp's mmvq, one integer sum per group of chunks sharing d and m and the min term
// from the quantiser's Σq. The
// chunks past the last whole slot (fewer than S, the last maybe ragged) go one to an invocation,
// each to the invocation whose slot would have come next, so that with S = 1 every chunk is
// where it always was.
// Per (row, column) the WG partial sums are then reduced in a fixed order, so results repeat bit
// for bit from run to run on one adapter; a row's sums do not depend on R (the same chunks, the
// same invocations, the same order), which the tests check.
//
// A format with a 16-entry code table (IQ4_NL, IQ4_XS, NVFP4) reads it from workgroup memory
// here (lib/lookup_wg.wgsl, filled by w_lookup_begin before anything else).
//
// Rows past the last read the last row (their sums are never written), so every invocation runs
// the same loops and reaches the reduction's barriers. The grid may be folded to 2-D: group =
// wid.y * nwg.x + wid.x; surplus workgroups return at once (uniformly). Params and the w and y
// bindings: matvec_io.wgsl, composed before this file (matvec_id's members unused here).

// Sums per invocation: row r, column b at index r * B + b.
const RB: u32 = R * B;

@compute @workgroup_size(WG)
fn matvec(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    lane: Lane,
) {
    let lid = lane_index(lane);
    // The format's 16-entry table into workgroup memory (lookup_wg.wgsl; a no-op without one).
    w_lookup_begin(lid);
    let group = wid.y * nwg.x + wid.x;
    let row0 = group * R;
    if (row0 >= params.n_rows) {
        return; // uniform per workgroup
    }
    let k = params.k;
    var base: array<u32, R>;
    for (var r = 0u; r < R; r++) {
        base[r] = params.w_skip + min(row0 + r, params.n_rows - 1u) * params.row_bytes;
    }
    var acc: array<f32, RB>;
    let n_chunks = (k + 7u) / 8u;
    let whole = k / 8u;
    // Slots all of whose chunks are whole.
    let slots = whole / S;
    var q = lid;
    if (U > 1u) {
        // U slots of each of the R rows decoded per step before any is summed.
        for (; q + (U - 1u) * WG < slots; q += U * WG) {
            rows_step_u(&acc, base, q, k);
        }
    }
    for (; q < slots; q += WG) {
        rows_step_1(&acc, base, q, k);
    }
    // The chunks past the whole slots, one per invocation from the one whose slot is next.
    let c = S * slots + (lid + WG - slots % WG) % WG;
    if (c < n_chunks) {
        var v: array<Chunk, R>;
        for (var r = 0u; r < R; r++) {
            v[r] = chunk(base[r], c);
        }
        let at = params.x_skip + 8u * c;
        if (8u * c + 8u <= k) {
            for (var b = 0u; b < B; b++) {
                let xs = x8(at + b * k);
                for (var r = 0u; r < R; r++) {
                    acc[r * B + b] += chunk_dot(v[r], xs);
                }
            }
        } else {
            // The ragged end of a one-value format's row: only the lanes inside it.
            let m = chunk_mask(c, k);
            for (var b = 0u; b < B; b++) {
                let xs = x8_tail(at + b * k, c, k);
                for (var r = 0u; r < R; r++) {
                    acc[r * B + b] += chunk_dot_tail(v[r], xs, m);
                }
            }
        }
    }
    // Invocation j < RB gets the workgroup's sum for row j / B, column j % B.
    let total = reduce_rows(acc, lane, lid);
    let r = lid / B;
    if (lid < RB && row0 + r < params.n_rows) {
        y[params.y_skip + (lid % B) * params.y_stride + row0 + r] = total;
    }
}

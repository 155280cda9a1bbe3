// Matrix-vector products on raw blocks: y = W x for B (1..8, or 16) columns, and ggml's
// MUL_MAT_ID (expert-indexed rows). Composed by src/gpu/kernels/compose.rs after three prepended
// constants, B (columns), T (invocations per row: 1 on CPU adapters; on GPUs the adapter's
// smallest subgroup where it has subgroups, else 64) and U (with T > 1, chunks per loop step:
// 4, their loads issued together; else 1), the weight's decode module, rows.wgsl, the
// x reader (x_scalar.wgsl, x_vec4.wgsl when K is a multiple of 4 and x 16-byte aligned, or
// x_shared.wgsl: one invocation per row on a device with subgroups) and the row reduction
// (reduce_tree.wgsl, or reduce_subgroup.wgsl), and followed by the row dot (row_dot.wgsl, then
// block_dot: one block's parts through part_dot, or four at a time through group_dot with shared
// vec4 x: written out for B = 1, T = 1, else in a loop per step; on the integer path
// matvec_q8.wgsl instead, with neither x reader nor rows.wgsl).
// CPU twin: ops::mul_mat / ops::mul_mat_id (f64).
//
// Thread mapping: a workgroup of WG = 64 invocations computes R = WG / T rows. The T invocations
// of a row take its 8-value chunks t, t + T, ... (neighbouring invocations read neighbouring
// bytes), decode each once with the format's own dequant8 and accumulate its dot products with
// the B columns of x in f32; their T partial sums are then added pairwise (reduce_row: a fixed
// tree, the same additions in the same order in both reductions, so results repeat exactly from
// run to run and between the two). With T = 1 (llvmpipe, SwiftShader: SIMD lanes over rows,
// where every barrier costs) a row is one invocation's sequential loop and nothing is reduced.
// Every invocation runs the same number of steps: a row past the last reads the last row (its
// sums are never written), so the loops stay uniform and x_shared.wgsl's lanes all take part.
// NaN and infinity propagate: lanes outside a row are masked with select, never multiplied by
// zero.
//
// With T > 1 (GPUs) a format's 16-entry code table (IQ4_NL, IQ4_XS, NVFP4) is read from
// workgroup memory (lib/lookup_wg.wgsl, filled by w_lookup_begin first); with T = 1 from its
// vec4<u32> constant (lib/lookup.wgsl, where w_lookup_begin does nothing).
//
// The grid may be folded to 2-D (more workgroups than fit one dimension): group = wid.y * nwg.x
// + wid.x; surplus workgroups of the last row return at once. For MUL_MAT_ID, wid.z is the
// (token, slot) pair counted from params.pair_first. Params and the w and y bindings:
// matvec_io.wgsl, composed before this file.

const WG: u32 = 64u;
const R: u32 = WG / T;

@compute @workgroup_size(WG)
fn matvec(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    lane: Lane,
) {
    let lid = lane_index(lane);
    x_begin(lane);
    w_lookup_begin(lid);
    let group = wid.y * nwg.x + wid.x;
    if (group * R >= params.n_rows) {
        return; // uniform per workgroup
    }
    let row = group * R + lid / T;
    let t = lid % T;
    let live = row < params.n_rows;
    let read_row = min(row, params.n_rows - 1u);
    let sums = row_dot(t, lid, params.w_skip + read_row * params.row_bytes, params.x_skip);
    if (live && t == 0u) {
        for (var b = 0u; b < B; b++) {
            y[params.y_skip + b * params.y_stride + row] = sums[b];
        }
    }
}

@group(0) @binding(3) var<storage, read> ids: array<u32>;

@compute @workgroup_size(WG)
fn matvec_id(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    lane: Lane,
) {
    let lid = lane_index(lane);
    x_begin(lane);
    w_lookup_begin(lid);
    let group = wid.y * nwg.x + wid.x;
    if (group * R >= params.n_rows) {
        return; // uniform per workgroup
    }
    let n = group * R + lid / T;
    let t = lid % T;
    let pair = params.pair_first + wid.z;
    let e = ids[params.ids_skip + wid.z];
    let out = params.y_skip + wid.z * params.n_rows + n;
    if (e >= params.n_experts) {
        // An id past the experts: NaN, written by the dispatch of the first rows only.
        if (params.row_first == 0u && t == 0u && n < params.n_rows) {
            y[out] = bitcast<f32>(0x7FC00000u);
        }
        return; // uniform per workgroup: e is the same for all its invocations
    }
    let g = e * params.n_rows + n;
    // Whether this row of the expert is in this dispatch's binding (rows outside it are left to
    // the dispatch that binds them; their invocations read the binding's first row, unwritten,
    // and take part in the loops all the same).
    let here = g >= params.row_first && g - params.row_first < params.row_count;
    let live = here && n < params.n_rows;
    let x_row = select(pair / params.slots, pair, params.x_per_slot != 0u);
    let row_base = params.w_skip + select(0u, g - params.row_first, here) * params.row_bytes;
    let sums = row_dot(t, lid, row_base, params.x_skip + x_row * params.k);
    if (live && t == 0u) {
        y[out] = sums[0];
    }
}

// Row gather (embedding lookup): out[i][k] = W[ids[i], k], decoded to f32, f16 or bf16. Composed
// after the weight's decode module with its output packer (out_f32, or out_f16 / out_bf16 with
// store_pairs, all prefixed `w_`) and rows.wgsl. CPU twin: ops::get_rows.
//
// Thread mapping: WG = 64 invocations per workgroup, VALUES = 8 consecutive output values per invocation (flat
// index over ids x K, so each invocation owns its output words). When K is a multiple of 8 the 8
// values are one chunk of one row, decoded once; otherwise (one-value formats only) value by value.
// A dispatch binds one run of rows; invocations whose row lies elsewhere write nothing.

struct Params {
    k: u32,          // values per row
    n_out: u32,      // values this dispatch's output window holds (ids x K)
    row_bytes: u32,  // bytes per row
    w_skip: u32,     // bytes from the start of `w` to row `row_first`
    row_first: u32,  // first row bound
    row_count: u32,  // rows bound
    n_rows: u32,     // rows of the weight (ids at or past it give NaN)
    ids_skip: u32,   // index in `ids` of this window's first id
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> ids: array<u32>;
@group(1) @binding(0) var<uniform> params: Params;

const WG: u32 = 64u;     // invocations per workgroup
const VALUES: u32 = 8u;  // output values per invocation

const NAN_BITS: u32 = 0x7FC00000u;

// Value `o` (flat output index) in this dispatch's rows, or `keep` when its row lies elsewhere.
fn value_at(o: u32, keep: u32) -> u32 {
    let row = ids[params.ids_skip + o / params.k];
    if (row >= params.n_rows) {
        return select(keep, NAN_BITS, params.row_first == 0u);
    }
    if (row < params.row_first || row - params.row_first >= params.row_count) {
        return keep;
    }
    let base = params.w_skip + (row - params.row_first) * params.row_bytes;
    return w_dequant8(base + (o % params.k) * w_BLOCK_BYTES, 0u)[0].x;
}

@compute @workgroup_size(WG)
fn get_rows(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let first = VALUES * (gid.y * nwg.x * WG + gid.x);
    if (first >= params.n_out) {
        return;
    }
    let avail = params.n_out - first;
    if (params.k % 8u == 0u) {
        let row = ids[params.ids_skip + first / params.k];
        var v: array<vec4<u32>, 2>;
        if (row >= params.n_rows) {
            if (params.row_first != 0u) {
                return;
            }
            v = array<vec4<u32>, 2>(vec4<u32>(NAN_BITS), vec4<u32>(NAN_BITS));
        } else {
            if (row < params.row_first || row - params.row_first >= params.row_count) {
                return;
            }
            let c = chunk8(params.w_skip + (row - params.row_first) * params.row_bytes, (first % params.k) / 8u);
            v = array<vec4<u32>, 2>(bitcast<vec4<u32>>(c[0]), bitcast<vec4<u32>>(c[1]));
        }
        w_store8(first, v, avail);
        return;
    }
    // K not a multiple of 8 (one-value formats; the weight is bound whole): value by value.
    var v: array<vec4<u32>, 2>;
    for (var j = 0u; j < 8u; j++) {
        if (j < avail) {
            v[j / 4u][j % 4u] = value_at(first + j, 0u);
        }
    }
    w_store8(first, v, avail);
}

// The matvec kernels' parameters and their weight and output bindings: composed before
// matvec.wgsl (the classic mapping and MUL_MAT_ID) and matvec_rows.wgsl (the rows mapping).
// Rust side: params::MatVecParams.

struct Params {
    k: u32,          // values per row
    n_rows: u32,     // rows this dispatch computes (matvec) or rows per expert (matvec_id)
    row_bytes: u32,  // bytes per row
    w_skip: u32,     // bytes from the start of `w` to this dispatch's first row
    x_skip: u32,     // index in `x` of x[0][0]
    y_skip: u32,     // index in `y` of this dispatch's first output
    y_stride: u32,   // distance in `y` between columns (N)
    row_first: u32,  // matvec_id: global row of `w`'s first bound row
    row_count: u32,  // matvec_id: rows bound
    n_experts: u32,  // matvec_id: E
    slots: u32,      // matvec_id: slots per token
    x_per_slot: u32, // matvec_id: 1 when x has one row per (token, slot), 0 for one per token
    pair_first: u32, // matvec_id: the (token, slot) pair of wid.z = 0
    ids_skip: u32,   // matvec_id: index in `ids` of that pair
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;

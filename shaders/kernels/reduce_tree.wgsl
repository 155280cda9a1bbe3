// Row reduction of the matvec kernels through workgroup memory: the baseline, on every adapter.
// The T partial sums of a row are added pairwise, stride T / 2 first, then T / 4, ... (a fixed
// tree, so results repeat exactly from run to run). Lanes: lane_local.wgsl, composed before this
// file.

var<workgroup> partial: array<array<f32, B>, WG>;

// The sums of the row of invocation `lid` (lane t), returned to lane 0. Called in uniform
// control flow by every invocation of the workgroup.
fn reduce_row(acc: array<f32, B>, t: u32, lid: u32) -> array<f32, B> {
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = T / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
            for (var b = 0u; b < B; b++) {
                partial[lid][b] += partial[lid + s][b];
            }
        }
        workgroupBarrier();
    }
    return partial[lid];
}

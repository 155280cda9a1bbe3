// Workgroup reduction of matvec_rows.wgsl through workgroup memory: the baseline, on every
// adapter. The WG partial sums of each value are added pairwise, stride WG / 2 first, then
// WG / 4, ... (a fixed tree: the same bits from run to run). Lanes: lane_local.wgsl, composed
// before this file.

var<workgroup> partial: array<array<f32, RB>, WG>;

// The workgroup's sum of value j of `acc` returned to invocation j (j < RB). Called in uniform
// control flow by every invocation of the workgroup.
fn reduce_rows(acc: array<f32, RB>, l: Lane, lid: u32) -> f32 {
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            for (var j = 0u; j < RB; j++) {
                partial[lid][j] += partial[lid + s][j];
            }
        }
        workgroupBarrier();
    }
    return partial[0][min(lid, RB - 1u)];
}

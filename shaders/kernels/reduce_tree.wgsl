// Row reduction of the matvec kernels through workgroup memory: the baseline, on every adapter.
// The T partial sums of a row are added pairwise, stride T / 2 first, then T / 4, ... (a fixed
// tree, so results repeat exactly from run to run).

// The invocation builtins a kernel maps rows and lanes from.
struct Lane {
    @builtin(local_invocation_index) index: u32,
}

// The invocation's index in its workgroup (0 .. WG): row lid / T, lane lid % T.
fn lane_index(l: Lane) -> u32 {
    return l.index;
}

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

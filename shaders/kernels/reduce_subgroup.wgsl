// Row reduction of the matvec kernels through subgroup shuffles: composed where the device has
// wgpu's SUBGROUP feature and T is at most the adapter's smallest subgroup, so that a row's T
// invocations are lanes of one subgroup. No workgroup memory, no barrier.
//
// A butterfly, stride T / 2 first, then T / 4, ...: lane t adds lane t ^ s. For t < s that is
// lane t + s, the very addition reduce_tree.wgsl makes, in the same order, so lane 0 ends with
// the tree's sums bit for bit (the other lanes hold other orders, and are not read). Lanes:
// lane_subgroup.wgsl, composed before this file.

// The sums of the row of invocation `lid` (lane t), returned to lane 0. Called in uniform
// control flow by every invocation of the workgroup.
fn reduce_row(acc: array<f32, B>, t: u32, lid: u32) -> array<f32, B> {
    var v = acc;
    for (var s = T / 2u; s > 0u; s >>= 1u) {
        for (var b = 0u; b < B; b++) {
            v[b] += subgroupShuffleXor(v[b], s);
        }
    }
    return v;
}

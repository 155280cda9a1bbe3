// Workgroup reduction of matvec_rows.wgsl through subgroup shuffles, then workgroup memory:
// composed where the device has wgpu's SUBGROUP feature, its smallest subgroup has at least 4
// lanes and its largest at most WG (so every subgroup is full). wgpu cannot ask for a subgroup
// size, so this is correct for any size the adapter runs: read at run time from the builtins.
//
// Each subgroup adds its lanes' sums by a butterfly (stride size / 2 first); its lane 0 stores
// them in `partial`; after one barrier invocation j < RB adds the subgroups' sums for value j in
// subgroup order. A fixed order for a given subgroup size: the same bits from run to run. Lanes:
// lane_subgroup.wgsl, composed before this file.

// One slot per subgroup of at least 4 lanes.
var<workgroup> partial: array<array<f32, RB>, WG / 4u>;

// The workgroup's sum of value j of `acc` returned to invocation j (j < RB). Called in uniform
// control flow by every invocation of the workgroup.
fn reduce_rows(acc: array<f32, RB>, l: Lane, lid: u32) -> f32 {
    var v = acc;
    for (var s = l.size / 2u; s > 0u; s >>= 1u) {
        for (var j = 0u; j < RB; j++) {
            v[j] += subgroupShuffleXor(v[j], s);
        }
    }
    if (l.id == 0u) {
        partial[l.subgroup] = v;
    }
    workgroupBarrier();
    var total = 0.0;
    if (lid < RB) {
        total = partial[0][lid];
        for (var g = 1u; g < WG / l.size; g++) {
            total += partial[g][lid];
        }
    }
    return total;
}

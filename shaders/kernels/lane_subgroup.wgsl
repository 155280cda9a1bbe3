// The invocation's lane in the matvec kernels on a device with subgroups (composed before
// reduce_subgroup.wgsl or reduce_rows_subgroup.wgsl).

// The invocation builtins a kernel maps rows and lanes from.
struct Lane {
    @builtin(subgroup_id) subgroup: u32,
    @builtin(subgroup_size) size: u32,
    @builtin(subgroup_invocation_id) id: u32,
}

// The invocation's index in its workgroup, counted subgroup by subgroup: whatever way the adapter
// groups invocations into subgroups, the T lanes of a row (lid / T) are consecutive lanes of one
// subgroup (T divides the subgroup size; a subgroup larger than the workgroup is its only one).
// The rows mapping needs only that the indices cover 0 .. WG once.
fn lane_index(l: Lane) -> u32 {
    return l.subgroup * l.size + l.id;
}

// The invocation's lane in the matvec kernels without subgroups (composed before reduce_tree.wgsl
// or reduce_rows_tree.wgsl).

// The invocation builtins a kernel maps rows and lanes from.
struct Lane {
    @builtin(local_invocation_index) index: u32,
}

// The invocation's index in its workgroup (0 .. WG; classic mapping: row lid / T, lane lid % T).
fn lane_index(l: Lane) -> u32 {
    return l.index;
}

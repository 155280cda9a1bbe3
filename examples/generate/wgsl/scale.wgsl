// x[i] *= c (gemma's embedding scale). Twin: reference.rs.
struct Params { n: u32, c: f32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;

@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * 64u + gid.x;
    if (i < params.n) { x[i] *= params.c; }
}

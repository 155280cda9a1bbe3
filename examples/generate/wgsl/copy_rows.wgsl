// dst row dst_row0 + t = src row t, for `tokens` rows of `row` values (V into the KV cache).
struct Params { tokens: u32, row: u32, dst_row0: u32, _pad: u32 }
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;

@compute @workgroup_size(64)
fn copy_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * 64u + gid.x;
    if (i < params.tokens * params.row) { dst[params.dst_row0 * params.row + i] = src[i]; }
}

// RoPE of `heads` heads of `head_dim` values per token, from `src` (row t) into `dst` (row
// dst_row0 + t): the first `n_rot` values of each head rotated in pairs by the angle of position
// pos0 + t, the rest copied. The cos/sin table `cs` (one vec2 per position and pair, computed in
// f64 on the host and rounded) makes the angles the same on every adapter. NEOX pairs i and
// i + n_rot/2, NORM pairs 2i and 2i + 1 (ggml's two modes). Twin: reference.rs `rope`.
struct Params { tokens: u32, heads: u32, head_dim: u32, n_rot: u32, pos0: u32, dst_row0: u32, neox: u32, _pad: u32 }
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;

@compute @workgroup_size(64)
fn rope(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let half = params.head_dim / 2u;
    let idx = gid.y * nwg.x * 64u + gid.x; // one pair (or two copied values) per invocation
    let per_token = params.heads * half;
    if (idx >= params.tokens * per_token) { return; }
    let t = idx / per_token;
    let h = (idx % per_token) / half;
    let i = idx % half;
    let row = params.heads * params.head_dim;
    let s = t * row + h * params.head_dim;
    let d = (params.dst_row0 + t) * row + h * params.head_dim;
    let half_rot = params.n_rot / 2u;
    var a: u32;
    var b: u32;
    if (params.neox != 0u) { a = i; b = i + half_rot; } else { a = 2u * i; b = 2u * i + 1u; }
    if (i < half_rot) {
        let c = cs[(params.pos0 + t) * half_rot + i];
        let x0 = src[s + a];
        let x1 = src[s + b];
        dst[d + a] = x0 * c.x - x1 * c.y;
        dst[d + b] = x0 * c.y + x1 * c.x;
    } else {
        // Past the rotated part: values n_rot + 2(i - n_rot/2) .. +1, copied.
        let j = params.n_rot + 2u * (i - half_rot);
        dst[d + j] = src[s + j];
        dst[d + j + 1u] = src[s + j + 1u];
    }
}

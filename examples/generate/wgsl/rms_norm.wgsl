// y[r] = x[r] / sqrt(mean(x[r]²) + eps) · w, for `rows` rows of `d` values (a row may be one head
// of a token). One workgroup per row: strided squares, then a fixed tree in workgroup memory, so
// results repeat bit for bit. Twin: reference.rs `rms_norm`.
struct Params { rows: u32, d: u32, eps: f32, _pad: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;
const WG: u32 = 64u;
var<workgroup> part: array<f32, WG>;

@compute @workgroup_size(WG)
fn rms_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let r = wid.y * nwg.x + wid.x;
    if (r >= params.rows) { return; } // uniform per workgroup
    let base = r * params.d;
    var s = 0.0;
    for (var i = lid; i < params.d; i += WG) {
        let v = x[base + i];
        s += v * v;
    }
    part[lid] = s;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
        if (lid < k) { part[lid] += part[lid + k]; }
        workgroupBarrier();
    }
    let inv = 1.0 / sqrt(part[0] / f32(params.d) + params.eps);
    for (var i = lid; i < params.d; i += WG) {
        y[base + i] = x[base + i] * inv * w[i];
    }
}

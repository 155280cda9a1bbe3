// Causal attention of `tokens` queries (positions pos0 .. pos0 + tokens) over the layer's KV
// cache, each query head h reading KV head h / (heads / kv_heads) (grouped-query attention),
// keys from max(0, p - window + 1) (window 0: from 0) to the query's own position p. One
// workgroup per (token, head): scores q·k · scale into `s` (the scratch row of this query and
// head), the maximum and the sum of exp by fixed trees in workgroup memory, then each output
// value Σ_j exp(s_j - max) v_j / sum. f32 throughout; results repeat bit for bit. Twin:
// reference.rs `attention`.
struct Params { tokens: u32, heads: u32, kv_heads: u32, head_dim: u32, pos0: u32, window: u32, s_stride: u32, scale: f32 }
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> s: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;
const WG: u32 = 64u;
var<workgroup> red: array<f32, WG>;

fn tree_max(lid: u32, x: f32) -> f32 {
    red[lid] = x;
    workgroupBarrier();
    for (var n = WG / 2u; n > 0u; n >>= 1u) {
        if (lid < n) { red[lid] = max(red[lid], red[lid + n]); }
        workgroupBarrier();
    }
    let m = red[0];
    workgroupBarrier();
    return m;
}

fn tree_sum(lid: u32, x: f32) -> f32 {
    red[lid] = x;
    workgroupBarrier();
    for (var n = WG / 2u; n > 0u; n >>= 1u) {
        if (lid < n) { red[lid] += red[lid + n]; }
        workgroupBarrier();
    }
    let m = red[0];
    workgroupBarrier();
    return m;
}

@compute @workgroup_size(WG)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    if (g >= params.tokens * params.heads) { return; } // uniform per workgroup
    let t = g / params.heads;
    let h = g % params.heads;
    let kvh = h / (params.heads / params.kv_heads);
    let p = params.pos0 + t;
    var lo = 0u;
    if (params.window != 0u && p + 1u > params.window) { lo = p + 1u - params.window; }
    let n = p + 1u - lo;
    let hd = params.head_dim;
    let qb = (t * params.heads + h) * hd;
    let kv_row = params.kv_heads * hd;
    let sb = g * params.s_stride;
    var m = -3.4028235e38;
    for (var j = lid; j < n; j += WG) {
        let kb = (lo + j) * kv_row + kvh * hd;
        var d = 0.0;
        for (var i = 0u; i < hd; i++) { d += q[qb + i] * k[kb + i]; }
        let sc = d * params.scale;
        s[sb + j] = sc;
        m = max(m, sc);
    }
    m = tree_max(lid, m);
    var sum = 0.0;
    for (var j = lid; j < n; j += WG) {
        let e = exp(s[sb + j] - m);
        s[sb + j] = e;
        sum += e;
    }
    sum = tree_sum(lid, sum);
    storageBarrier();
    let ob = (t * params.heads + h) * hd;
    for (var i = lid; i < hd; i += WG) {
        var acc = 0.0;
        for (var j = 0u; j < n; j++) { acc += s[sb + j] * v[(lo + j) * kv_row + kvh * hd + i]; }
        o[ob + i] = acc / sum;
    }
}

// The index of the largest of `n` logits from `offset` (the lowest index among equals), into
// out[0]: greedy decoding's next token. One workgroup: strided scan, then a fixed tree.
struct Params { n: u32, offset: u32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(1) @binding(0) var<uniform> params: Params;
const WG: u32 = 256u;
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn argmax(@builtin(local_invocation_index) lid: u32) {
    var bv = -3.4028235e38;
    var bi = 0xFFFFFFFFu;
    for (var i = lid; i < params.n; i += WG) {
        let v = logits[params.offset + i];
        if (v > bv || bi == 0xFFFFFFFFu) { bv = v; bi = i; }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
        if (lid < k) {
            let ov = best_v[lid + k];
            let oi = best_i[lid + k];
            if (oi != 0xFFFFFFFFu && (ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid]) || best_i[lid] == 0xFFFFFFFFu)) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) { out[0] = best_i[0]; }
}

// The shader-copy roofline of `gguf-dequant bench` (src/gpu/roofline.rs): a streaming kernel with
// the traffic shape of a dequantisation, and no decoding. It reads a window's quantised bytes and
// writes its output bytes, both as vec4<u32>, with the dequantisers' workgroup size (64) and grid
// (one workgroup per 512 output values, folded to 2-D above 65 535 workgroups; the surplus groups
// of the last row return at once).
//
// Workgroup g owns the input words [g * in_span, (g + 1) * in_span) and the output words
// [g * out_span, (g + 1) * out_span) of the window (out_span = 128 for f32 output, 64 for f16/bf16:
// two or one vec4 per invocation, as the dequantisers store). Output word m of the group is the XOR
// of its input words k < in_span with k = m (mod out_span), zero when there is none: every input
// word is loaded exactly once (coalesced: word k by invocation k mod 64), every output word stored
// once, and equal spans make it an exact copy. CPU twin: `roofline::expected`.

struct Params {
    n_groups: u32,   // workgroups that carry words
    in_span: u32,    // input words per workgroup
    out_span: u32,   // output words per workgroup (a multiple of WG_SIZE)
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> params: Params;

const WG_SIZE: u32 = 64u;

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let group = wid.y * nwg.x + wid.x;
    if (group >= params.n_groups) {
        return;
    }
    let n_in = arrayLength(&src);
    let n_out = arrayLength(&dst);
    let in0 = group * params.in_span;
    let out0 = group * params.out_span;
    for (var m = lid; m < params.out_span; m += WG_SIZE) {
        var v = vec4<u32>(0u);
        for (var k = m; k < params.in_span; k += params.out_span) {
            let i = in0 + k;
            if (i < n_in) {
                v ^= src[i];
            }
        }
        let o = out0 + m;
        if (o < n_out) {
            dst[o] = v;
        }
    }
}

// A projection's activations as llama.cpp's CPU backend has them before its dot products: each
// row quantised to the weight's vec_dot_type (ggml-cpu.c type_traits_cpu) and written back as what
// those blocks decode to, so that our f32 dot product on them is ggml's integer one (up to f32
// rounding). Kinds: 0 Q8_0 (and Q8_1's quants: x86 quantize_row_q8_0/q8_1, blocks of 32,
// id = 127/max|x|, d rounded to f16), 1 Q8_K (quantize_row_q8_K_ref, blocks of 256,
// iscale = -127/x at max|x|, d = 1/iscale in f32), 2 f16, 3 bf16 (round to nearest even).
// WGSL's division is within 2.5 ulp, not correctly rounded (SwiftShader's is not), so a scale
// may be an ulp or two from ggml's, and a value at a half-integer quant round the other way.
// Twin: tests/gpu/generate.rs `ggml_round`.
struct Params { rows: u32, k: u32, src_at: u32, kind: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;

fn to_f16(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

fn to_bf16(v: f32) -> f32 {
    let u = bitcast<u32>(v);
    return bitcast<f32>((u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u);
}

// One invocation per block: 32 values for Q8_0, 256 for Q8_K, one for f16 and bf16.
@compute @workgroup_size(64)
fn ggml_cpu(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let kind = params.kind;
    let bs = select(select(32u, 256u, kind == 1u), 1u, kind >= 2u);
    let per_row = params.k / bs;
    let blk = gid.y * nwg.x * 64u + gid.x;
    if (blk >= params.rows * per_row) { return; }
    let out = (blk / per_row) * params.k + (blk % per_row) * bs;
    let src = params.src_at + out;
    if (kind == 0u) {
        var amax = 0.0;
        for (var i = 0u; i < 32u; i++) { amax = max(amax, abs(x[src + i])); }
        let d = to_f16(amax / 127.0);
        let id = select(0.0, 127.0 / amax, amax != 0.0);
        for (var i = 0u; i < 32u; i++) { y[out + i] = d * round(x[src + i] * id); }
    } else if (kind == 1u) {
        var amax = 0.0;
        var at_max = 0.0;
        for (var i = 0u; i < 256u; i++) {
            let v = x[src + i];
            if (abs(v) > amax) { amax = abs(v); at_max = v; }
        }
        if (amax == 0.0) {
            for (var i = 0u; i < 256u; i++) { y[out + i] = 0.0; }
            return;
        }
        let iscale = -127.0 / at_max;
        let d = 1.0 / iscale;
        for (var i = 0u; i < 256u; i++) { y[out + i] = d * min(127.0, round(iscale * x[src + i])); }
    } else {
        y[out] = select(to_bf16(x[src]), to_f16(x[src]), kind == 2u);
    }
}

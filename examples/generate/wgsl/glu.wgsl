// The gated FFN's activation: gate[i] = act(gate[i]) · up[i], act = silu (kind 0), ggml's tanh
// GELU (kind 1), or that GELU as llama.cpp's CPU backend has it (kind 2: ggml_vec_geglu_f32 with
// GGML_GELU_FP16, a table of f16 results by f16 argument, 0 below -10, the identity above 10).
// Twin: reference.rs `glu`.
struct Params { n: u32, kind: u32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<storage, read_write> gate: array<f32>;
@group(0) @binding(1) var<storage, read> up: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;
const GELU_COEF_A: f32 = 0.044715;
const SQRT_2_OVER_PI: f32 = 0.79788456080286535587989211986876;

fn gelu(g: f32) -> f32 {
    // tanh's argument clamped to ±15, where tanh is ±1 in f32 anyway: SwiftShader's tanh of a
    // larger argument is NaN (it divides two overflowed exponentials).
    let u = clamp(SQRT_2_OVER_PI * g * (1.0 + GELU_COEF_A * g * g), -15.0, 15.0);
    return 0.5 * g * (1.0 + tanh(u));
}

fn to_f16(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

@compute @workgroup_size(64)
fn glu(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * 64u + gid.x;
    if (i >= params.n) { return; }
    let g = gate[i];
    var a: f32;
    if (params.kind == 0u) {
        a = g / (1.0 + exp(-g));
    } else if (params.kind == 1u) {
        a = gelu(g);
    } else if (g <= -10.0) {
        a = 0.0;
    } else if (g >= 10.0) {
        a = g;
    } else {
        a = to_f16(gelu(to_f16(g)));
    }
    gate[i] = a * up[i];
}

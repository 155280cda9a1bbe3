// x of the integer matvec path (matvec_q8.wgsl) as int8 codes, once per call: each run of 32
// values (a block, as ggml's Q8_1) becomes dx = amax / 127 and q = round(x / dx) clamped to
// ±127, packed four per word, and the sums of its codes, Σq over values 0..16 and 16..32 as the
// low and high i16 of one word (|Σq| ≤ 2032): the rows mapping's integer chunks take a slot's
// Σq from there (the min term m Σq) where the weight's parts share their min. One invocation
// per block.
// CPU twin: the quantisation step of ops::mul_mat_int_dot (which bounds what it loses).
//
// Blocks whose amax is below 127 * 2^-126 (dx would be subnormal) get dx = 0 and q = 0; blocks
// with a NaN or infinity get dx = NaN, so that their column's sums are NaN.

struct Params {
    blocks: u32,   // blocks of 32 values to quantise
    x_skip: u32,   // index in `x` of the first value
    d_at: u32,     // index in `xq` of the first block's dx (its codes start at word 0)
    s_at: u32,     // index in `xq` of the first block's sums
}

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> xq: array<u32>;
@group(1) @binding(0) var<uniform> params: Params;

@compute @workgroup_size(64)
fn quantize_q8(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let blk = (wid.y * nwg.x + wid.x) * 64u + lid;
    if (blk >= params.blocks) {
        return;
    }
    let o = params.x_skip + 32u * blk;
    var v: array<vec4<f32>, 8>;
    var amax = vec4<f32>(0.0);
    var special = vec4<u32>(0u);
    for (var i = 0u; i < 8u; i++) {
        v[i] = vec4<f32>(x[o + 4u * i], x[o + 4u * i + 1u], x[o + 4u * i + 2u], x[o + 4u * i + 3u]);
        amax = max(amax, abs(v[i]));
        // Exponent all ones: a NaN or an infinity (read from the bits: max may drop a NaN).
        special |= vec4<u32>((bitcast<vec4<u32>>(v[i]) & vec4<u32>(0x7F800000u)) == vec4<u32>(0x7F800000u));
    }
    let a = max(max(amax.x, amax.y), max(amax.z, amax.w));
    var d = a / 127.0;
    var id = 0.0;
    if (a >= 127.0 * 1.17549435e-38) {
        id = 127.0 / a;
    } else {
        d = 0.0;
    }
    if (any(special != vec4<u32>(0u))) {
        d = bitcast<f32>(0x7FC00000u);
        id = 0.0;
    }
    var sums = vec2<i32>(0);
    for (var i = 0u; i < 8u; i++) {
        let q = vec4<i32>(clamp(round(v[i] * id), vec4<f32>(-127.0), vec4<f32>(127.0)));
        xq[8u * blk + i] = pack_i8(q);
        let s = q.x + q.y + q.z + q.w;
        if (i < 4u) {
            sums.x += s;
        } else {
            sums.y += s;
        }
    }
    xq[params.d_at + blk] = bitcast<u32>(d);
    xq[params.s_at + blk] = (bitcast<u32>(sums.x) & 0xFFFFu) | (bitcast<u32>(sums.y) << 16u);
}


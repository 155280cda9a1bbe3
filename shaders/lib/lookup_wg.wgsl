// lookup.wgsl's functions from workgroup memory: the 16 entries of the format's `KVALUES` as f32
// and as int8 bytes, filled once per workgroup by `lookup_begin`, then one load per value where
// a lookup in the vec4<u32> constant takes about ten instructions on AMD's compiler (a select
// per word, a shift, a sign extension; llama.cpp's shaders read shared memory too). The same
// values, so the same sums, bit for bit. Composed in lookup.wgsl's place by the matvec kernels
// on the rows mapping (src/gpu/kernels/family/matvec.rs), which call `lookup_begin` first, before
// any invocation may return, with every workgroup of at least 16 invocations.

var<workgroup> lookup_f32: array<f32, 16>;
var<workgroup> lookup_i8: array<u32, 16>;

// Invocation `i` of the workgroup writes entry i (i < 16); then the barrier.
fn lookup_begin(i: u32) {
    if (i < 16u) {
        let v = table_i8(KVALUES, i);
        lookup_f32[i] = f32(v);
        lookup_i8[i] = bitcast<u32>(v) & 0xFFu;
    }
    workgroupBarrier();
}

fn lookup4_f32(c: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(lookup_f32[c.x], lookup_f32[c.y], lookup_f32[c.z], lookup_f32[c.w]);
}

fn lookup4_i8(c: vec4<u32>) -> u32 {
    return lookup_i8[c.x] | (lookup_i8[c.y] << 8u) | (lookup_i8[c.z] << 16u) | (lookup_i8[c.w] << 24u);
}

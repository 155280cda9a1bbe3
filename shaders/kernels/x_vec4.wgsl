// x of the matvec kernels read four values per load (llvmpipe and SwiftShader pay per load, not
// per byte): the same run of x as binding 1, when K is a multiple of 4 and x is 16-byte aligned.

@group(0) @binding(5) var<storage, read> xv: array<vec4<f32>>;

// x[o .. o + 8] as two vec4 (o a multiple of 4).
fn x8(o: u32) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(xv[o / 4u], xv[o / 4u + 1u]);
}

// Nothing to set up (x_shared.wgsl takes the invocation's lane here).
fn x_begin(l: Lane) {}

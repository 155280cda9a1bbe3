// x of the matvec kernels read value by value (any K, any 4-byte alignment).

// x[o .. o + 8] as two vec4.
fn x8(o: u32) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(
        vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]),
        vec4<f32>(x[o + 4u], x[o + 5u], x[o + 6u], x[o + 7u]),
    );
}

// Nothing to set up (x_shared.wgsl takes the invocation's lane here).
fn x_begin(l: Lane) {}

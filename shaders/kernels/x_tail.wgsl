// The ragged end of a one-value format's row for the matvec kernels (composed after the x
// reader): x read value by value, only the values inside the row.

// x[o .. o + 8] as two vec4, the values at or past index k of the row (chunk c) left zero.
fn x8_tail(o: u32, c: u32, k: u32) -> array<vec4<f32>, 2> {
    var xs: array<vec4<f32>, 2>;
    for (var j = 0u; j < 8u; j++) {
        if (8u * c + j < k) {
            xs[j / 4u][j % 4u] = x[o + j];
        }
    }
    return xs;
}

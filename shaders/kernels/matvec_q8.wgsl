// The integer path of matvec (EngineOptions::matvec_integer_dot; off by default), as llama.cpp's
// mmvq: x quantised once per call by quantize_q8.wgsl into the recorder's scratch buffer, then
// each 8-value part of a weight row as int8 codes (the format's qpart8: values d * q + m) dotted
// with x's codes through dot4I8Packed. Composed by src/gpu/kernels/compose.rs after matvec.wgsl
// (its entry points, Params and thread mapping) in place of row_dot.wgsl.
// CPU twin: ops::mul_mat_int_dot (its bound is this path's accuracy contract).
//
// x's codes, for column b (0 .. B) and value i (0 .. K, K a multiple of 32): byte i % 4 of word
// b * K / 4 + i / 4 of `x`; the scale dx of values 32j .. 32j + 32 of column b: word
// B * K / 4 + b * K / 32 + j, f32 bits, NaN where those values are not all finite. A part adds
// dx * (d * Σ q xq + m * Σ xq) to its column's sum (the second product only for formats with
// QPART8_MIN): the integer dots are exact, so the f32 arithmetic is 4 operations per part where
// the f32 path has 16.

@group(0) @binding(1) var<storage, read> x: array<u32>;

// Nothing to set up: every invocation reads x's codes itself.
fn x_begin(l: Lane) {}

// Σ_k W[row, k] x[b][k] for the B columns, for the row at byte `row_base` (`x_at` unused: the
// codes start at word 0): this invocation's parts t, t + T, ... reduced over the row's T
// invocations and returned to its invocation t = 0.
fn row_dot(t: u32, lid: u32, row_base: u32, x_at: u32) -> array<f32, B> {
    let k = params.k;
    let parts = w_BLOCK_ELEMS / 8u;
    let n_parts = k / 8u;
    let words = k / 4u;
    let scales = B * words;
    var acc: array<f32, B>;
    for (var c = t; c < n_parts; c += T) {
        let q = w_qpart8(row_base + (c / parts) * w_BLOCK_BYTES, c % parts);
        let d = bitcast<f32>(q.z);
        let m = bitcast<f32>(q.w);
        for (var b = 0u; b < B; b++) {
            let o = b * words + 2u * c;
            let x0 = x[o];
            let x1 = x[o + 1u];
            var s = d * f32(dot4I8Packed(q.x, x0) + dot4I8Packed(q.y, x1));
            if (w_QPART8_MIN) {
                s += m * f32(dot4I8Packed(0x01010101u, x0) + dot4I8Packed(0x01010101u, x1));
            }
            acc[b] += bitcast<f32>(x[scales + b * (k / 32u) + c / 4u]) * s;
        }
    }
    if (T == 1u) {
        return acc;
    }
    return reduce_row(acc, t, lid);
}

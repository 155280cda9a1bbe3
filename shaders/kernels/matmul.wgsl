// Matrix-matrix products on raw blocks for prompt batches: Y = W X, X with any number of columns.
// Composed after the weight's decode module and rows.wgsl. CPU twin: ops::mul_mat (f64).
//
// Tiling: a workgroup of 64 invocations computes a TN x TB = 32 x 32 tile of Y (rows x columns),
// 4 x 4 outputs per invocation, stepping through K in TK = 32 values: each step decodes the 32 x 32
// tile of W into workgroup memory once (128 chunks of 8 values: 2 per invocation, with the format's
// own dequant8) and loads the 32 x 32 tile of X, then every invocation does 16 f32 FMAs per k.
// Tiles past the last row, column or value are zero-filled in workgroup memory (never multiplied
// into an output that is stored), so NaN and infinity in W or X reach exactly the outputs they
// belong to. The k order is fixed, so results repeat exactly from run to run.

struct Params {
    k: u32,          // values per row
    n_rows: u32,     // rows this dispatch computes
    row_bytes: u32,  // bytes per row
    w_skip: u32,     // bytes from the start of `w` to this dispatch's first row
    x_skip: u32,     // index in `x` of this dispatch's first column
    y_skip: u32,     // index in `y` of (first column, first row)
    y_stride: u32,   // distance in `y` between columns (N)
    n_cols: u32,     // columns this dispatch computes
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;

const WG: u32 = 64u;
const TN: u32 = 32u;
const TB: u32 = 32u;
const TK: u32 = 32u;

var<workgroup> wt: array<vec4<f32>, 256>; // TN rows x TK values: wt[r * 8 + k / 4]
var<workgroup> xt: array<vec4<f32>, 256>; // TB columns x TK values: xt[b * 8 + k / 4]

@compute @workgroup_size(WG)
fn matmul(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row0 = wid.x * TN;
    let col0 = wid.y * TB;
    let k = params.k;
    let tr = (lid / 8u) * 4u; // this invocation's 4 rows and 4 columns of the tile
    let tc = (lid % 8u) * 4u;
    var acc: array<vec4<f32>, 4>; // acc[i][j]: row tr + i, column tc + j
    for (var k0 = 0u; k0 < k; k0 += TK) {
        for (var i = 0u; i < 2u; i++) {
            let t = lid + 64u * i;  // chunk t: row t / 4, values 8 (t % 4) ..
            let r = t / 4u;
            let q = t % 4u;
            let row = row0 + r;
            let c = k0 / 8u + q;
            var v = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
            if (row < params.n_rows && 8u * c < k) {
                v = chunk8(params.w_skip + row * params.row_bytes, c);
                let m = chunk_mask(c, k);
                v[0] = select(vec4<f32>(0.0), v[0], m[0]);
                v[1] = select(vec4<f32>(0.0), v[1], m[1]);
            }
            wt[r * 8u + 2u * q] = v[0];
            wt[r * 8u + 2u * q + 1u] = v[1];
        }
        for (var i = 0u; i < 4u; i++) {
            let t = lid + 64u * i;  // column t / 8, values 4 (t % 8) ..
            let b = t / 8u;
            let kk = k0 + 4u * (t % 8u);
            var v = vec4<f32>(0.0);
            if (col0 + b < params.n_cols) {
                let o = params.x_skip + (col0 + b) * k + kk;
                for (var j = 0u; j < 4u; j++) {
                    if (kk + j < k) {
                        v[j] = x[o + j];
                    }
                }
            }
            xt[t] = v;
        }
        workgroupBarrier();
        for (var q = 0u; q < 8u; q++) {
            var a: array<vec4<f32>, 4>;
            var bv: array<vec4<f32>, 4>;
            for (var i = 0u; i < 4u; i++) {
                a[i] = wt[(tr + i) * 8u + q];
                bv[i] = xt[(tc + i) * 8u + q];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] += dot(a[i], bv[j]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
            let row = row0 + tr + i;
            let col = col0 + tc + j;
            if (row < params.n_rows && col < params.n_cols) {
                y[params.y_skip + col * params.y_stride + row] = acc[i][j];
            }
        }
    }
}

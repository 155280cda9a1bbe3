// x of the matvec kernels read once per XL rows, for one invocation per row: every row of the
// workgroup reads the same x, and llvmpipe and SwiftShader load storage lane by lane (a vec4 of
// x cost each lane four loads). Here lane l of each XL lanes of a subgroup reads values l,
// l + XL, ... of the eight and subgroupBroadcast hands every value to all lanes: the same
// values, XL times fewer loads. Composed after the reduction file (its `Lane` carries the
// subgroup builtins) and preceded by `const XL` (2, 4 or 8, at most the adapter's smallest
// subgroup); `x8` follows, written out by compose.rs (subgroupBroadcast takes a constant lane).
// Called in uniform control flow only: every lane of the subgroup reads its share.

var<private> x_lane: u32;

// Takes the invocation's lane for x8's reads (called first by every kernel).
fn x_begin(l: Lane) {
    x_lane = l.id % XL;
}

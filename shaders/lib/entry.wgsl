// The shared compute entry point of the one-value-per-block and 32/64/128/256-value formats.
//
// Contract with the format file (composed before this one): `BLOCK_ELEMS`, `BLOCK_BYTES`, and
//     fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2>
// returning the f32 bit patterns of values 8*part .. 8*part+8 of the block whose first byte is at
// tile offset `base`. A one-value format (BLOCK_ELEMS = 1) gets part = 0 and returns the 8 values
// of the 8 consecutive blocks from `base` on.
// Contract with the output file (out_f32 / out_f16 / out_bf16): `store8(first, v, avail)` writes
// values first .. first + min(avail, 8) of the window.
//
// Thread mapping: WG_SIZE invocations per workgroup, VALS = 8 contiguous values per invocation,
// so a workgroup decodes WG_VALS = 512 values = WG_BLOCKS whole blocks. The workgroup first copies
// the words covering its blocks' bytes into `tile` (coalesced u32 loads: word i by invocation
// i mod WG_SIZE), then each invocation decodes its 8 values from the tile and stores them as
// two vec4 words (f32) or one vec4 of f16/bf16 pairs. Every value is written by exactly one
// invocation; a workgroup never straddles a window, so windows need no overlap.
//
// The grid may be folded to 2-D (more than 65 535 workgroups): group = wid.y * nwg.x + wid.x,
// and the at most nwg.y - 1 surplus groups of the last row return at once.

struct Params {
    n_out: u32,      // values this window writes
    n_groups: u32,   // workgroups that carry values
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> params: Params;

const WG_SIZE: u32 = 64u;
const VALS: u32 = 8u;
const WG_VALS: u32 = WG_SIZE * VALS;
const WG_BLOCKS: u32 = WG_VALS / BLOCK_ELEMS;
// The block span plus up to 3 bytes of skew, plus one word so `load_u32` may read one past it.
const TILE_WORDS: u32 = (WG_BLOCKS * BLOCK_BYTES + 3u + 3u) / 4u + 1u;

var<workgroup> tile: array<u32, TILE_WORDS>;

@compute @workgroup_size(WG_SIZE)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let group = wid.y * nwg.x + wid.x;
    if (group >= params.n_groups) {
        return;   // uniform per workgroup, so the barrier below stays in uniform control flow
    }
    let start_byte = group * WG_BLOCKS * BLOCK_BYTES;
    let start_word = start_byte >> 2u;
    let n_src = arrayLength(&src);
    for (var i = lid; i < TILE_WORDS; i += WG_SIZE) {
        let w = start_word + i;
        tile[i] = select(0u, src[min(w, n_src - 1u)], w < n_src);
    }
    workgroupBarrier();

    let local = lid * VALS;
    let first = group * WG_VALS + local;
    if (first >= params.n_out) {
        return;
    }
    let block = local / BLOCK_ELEMS;
    let part = (local % BLOCK_ELEMS) / VALS;
    let v = dequant8((start_byte & 3u) + block * BLOCK_BYTES, part);
    store8(first, v, params.n_out - first);
}

// Byte, u16 and u32 extraction from the workgroup tile of raw source words.
// CPU twins: u16_le / u32_le and plain byte indexing in src/formats/common.rs.
//
// `tile` (declared in lib/entry.wgsl) holds a block-aligned span of the source tensor, copied from
// the `array<u32>` storage binding with coalesced word loads. `byte` is a byte offset into that
// tile: the entry point passes each block's base as `skew + block * BLOCK_BYTES`, so fields at any
// alignment (blocks of 17, 18, 22 or 34 bytes) are assembled here from whole words with shifts.
// Packed bits only ever live in u32 values.

// The byte at tile offset `byte`, in bits 0..8.
fn load_u8(byte: u32) -> u32 {
    return (tile[byte >> 2u] >> ((byte & 3u) * 8u)) & 0xFFu;
}

// The little-endian u32 at tile offset `byte` (any alignment; may straddle two words).
fn load_u32(byte: u32) -> u32 {
    let w = byte >> 2u;
    let sh = (byte & 3u) * 8u;
    // A shift by 32 is not a no-op in WGSL (the amount is taken mod 32), hence the select.
    let hi = select(0u, tile[w + 1u] << ((32u - sh) & 31u), sh != 0u);
    return (tile[w] >> sh) | hi;
}

// The 8 bytes at tile offset `byte` (any alignment) as two little-endian u32: three word loads
// shifted together, where two load_u32 calls would make four.
fn load_u32x2(byte: u32) -> vec2<u32> {
    let w = byte >> 2u;
    let sh = (byte & 3u) * 8u;
    let lo = vec2<u32>(tile[w], tile[w + 1u]);
    let hi = vec2<u32>(lo.y, tile[w + 2u]);
    // As in load_u32, the shift by 32 - sh is taken mod 32: the select keeps the aligned words.
    return select((lo >> vec2<u32>(sh)) | (hi << vec2<u32>((32u - sh) & 31u)), lo, sh == 0u);
}

// The 16 bytes at tile offset `byte` (any alignment) as four little-endian u32: four word loads
// when aligned, else five shifted together, where four load_u32 calls would make eight.
fn load_u32x4(byte: u32) -> vec4<u32> {
    let w = byte >> 2u;
    let sh = (byte & 3u) * 8u;
    let a0 = tile[w];
    let a1 = tile[w + 1u];
    let a2 = tile[w + 2u];
    let a3 = tile[w + 3u];
    let lo = vec4<u32>(a0, a1, a2, a3);
    if (sh == 0u) {
        return lo; // word-aligned (e.g. the rows of an F16/BF16 weight of even K): four loads
    }
    let hi = vec4<u32>(a1, a2, a3, tile[w + 4u]);
    return (lo >> vec4<u32>(sh)) | (hi << vec4<u32>(32u - sh));
}

// The little-endian u32 at tile offset `byte`, a multiple of 4 bytes into its block: one word
// load where BLOCK_BYTES is a multiple of 4. Every caller lays blocks out from the first byte of
// a word (the dequantiser's tile, the kernels' rows and parts, a bound resident tensor), so
// there every block starts on a word and the read never straddles two; otherwise load_u32.
fn load_word(byte: u32) -> u32 {
    if (BLOCK_BYTES % 4u == 0u) {
        return tile[byte >> 2u];
    }
    return load_u32(byte);
}

// The little-endian u16 at tile offset `byte`, in bits 0..16. Where BLOCK_BYTES is even, every
// block starts on an even byte (as above) and every u16 field of the format lies at an even
// offset in it (ggml's structs align them), so the u16 is inside one word: one load. Otherwise
// at any alignment.
fn load_u16(byte: u32) -> u32 {
    if (BLOCK_BYTES % 2u == 0u) {
        return (tile[byte >> 2u] >> ((byte & 2u) * 8u)) & 0xFFFFu;
    }
    return load_u32(byte) & 0xFFFFu;
}

// The four bytes of `w` as lanes, unsigned (byte k of the word in lane k).
fn bytes4(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}

// The four bytes of `w` as lanes, sign-extended from int8 (ggml's `int8_t` codes).
fn sbytes4(w: u32) -> vec4<i32> {
    return bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
}

// Byte `i` (0..16) of a 16-entry int8 table packed four per word, sign-extended.
fn table_i8(t: vec4<u32>, i: u32) -> i32 {
    return bitcast<i32>((t[i >> 2u] >> ((i & 3u) * 8u)) << 24u) >> 24u;
}

// Bits k0 .. k0+4 of `b` as lanes (0 or 1).
fn bits4(b: u32, k0: u32) -> vec4<u32> {
    return (vec4<u32>(b) >> (vec4<u32>(0u, 1u, 2u, 3u) + k0)) & vec4<u32>(1u);
}

// The four codes `c` looked up in a packed 16-entry int8 table.
fn table4(t: vec4<u32>, c: vec4<u32>) -> vec4<i32> {
    return vec4<i32>(table_i8(t, c.x), table_i8(t, c.y), table_i8(t, c.z), table_i8(t, c.w));
}

// Eight f32 values as the two vec4 words of f32 bits that `dequant8` returns.
fn bits8(a: vec4<f32>, b: vec4<f32>) -> array<vec4<u32>, 2> {
    return array<vec4<u32>, 2>(bitcast<vec4<u32>>(a), bitcast<vec4<u32>>(b));
}

// The f32 values of a qpart8 part (layout: lib/int8.wgsl) as dequant8 returns them: d * q, then
// + m where `with_m` (the format's QPART8_MIN): the decoders' own arithmetic, so the same bits.
fn qpart_values(p: vec4<u32>, with_m: bool) -> array<vec4<u32>, 2> {
    let d = bitcast<f32>(p.z);
    if (with_m) {
        // The codes of the formats with a min are unsigned and below 128 (lib/int8.wgsl): read as
        // unsigned bytes, the same values, with no sign extension (one conversion instruction per
        // byte on AMD).
        let m = bitcast<f32>(p.w);
        var lo = vec4<f32>(bytes4(p.x)) * d;
        var hi = vec4<f32>(bytes4(p.y)) * d;
        lo += vec4<f32>(m);
        hi += vec4<f32>(m);
        return bits8(lo, hi);
    }
    return bits8(vec4<f32>(sbytes4(p.x)) * d, vec4<f32>(sbytes4(p.y)) * d);
}

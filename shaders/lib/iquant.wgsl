// Shared helpers of the i-quant grid formats (IQ2_*, IQ3_*, and IQ1_S, IQ1_M's parts with a
// delta). CPU twins: the sign handling and the `(db * g[j]) * ±1` products in
// src/formats/iquant/{iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s}.rs, `dl * (g[j] + delta)` in
// src/formats/iquant/{iq1_s,iq1_m}.rs.

// ggml `ksigns_iq2xs[k]` (7-bit sign index to 8-bit mask) without a table: bit 7 makes the number
// of set bits even, `k | parity(k) << 7`. tests/shaders_layout_sync.rs checks all 128 entries.
fn ksigns_iq2xs(k: u32) -> u32 {
    return k | ((countOneBits(k) & 1u) << 7u);
}

// +1.0 or -1.0 for bits k0 .. k0+4 of the sign mask `s` (set bit: negative).
fn signs4(s: u32, k0: u32) -> vec4<f32> {
    return select(vec4<f32>(1.0), vec4<f32>(-1.0), bits4(s, k0) == vec4<u32>(1u));
}

// One 8-value part of a grid format: its values are `(db * g[j]) * sign_j`, g = the unsigned
// bytes of g.x (elements 0..4) and g.y (elements 4..8), each 1..127 (every grid's values are),
// sign_j = bit j of the mask `s` (set: negative). Each format's `grid_part` reads it; its
// dequant8 and qpart8 are the two readers below.
struct GridPart {
    db: f32,
    g: vec2<u32>,
    s: u32,
}

// The part's values as f32 bits. The CPU's operation order: the product db * g is rounded first,
// then multiplied by ±1 (exact). Every product here is exact anyway (see the format files), so
// neither order nor FMA contraction can change a bit.
fn grid_signed8(p: GridPart) -> array<vec4<u32>, 2> {
    let lo = (p.db * vec4<f32>(bytes4(p.g.x))) * signs4(p.s, 0u);
    let hi = (p.db * vec4<f32>(bytes4(p.g.y))) * signs4(p.s, 4u);
    return bits8(lo, hi);
}

// The part on the integer path (kernels/matvec_q8.wgsl, chunk_int8.wgsl): codes q = ±g as int8
// lanes and d = db, so d * q is the value exactly (m = 0).
fn grid_qpart8(p: GridPart) -> vec4<u32> {
    return qpart(neg_bytes(p.g.x, p.s), neg_bytes(p.g.y, p.s >> 4u), p.db, 0.0);
}

// One 8-value part of IQ1_S or IQ1_M: its values are `dl * (g[j] + delta)`, g = the int8 bytes
// of g.x (elements 0..4) and g.y (elements 4..8), each -1, 0 or 1, delta = -1/8 where `neg`,
// else +1/8. Exact on every GPU: g + delta is 1/8, 7/8 or 9/8 (at most 4 significant bits), dl
// at most 11 + 4, so the product rounds nothing.
struct DeltaPart {
    dl: f32,
    g: vec2<u32>,
    neg: bool,
}

const IQ1_DELTA: f32 = 0.125;

// The part's values as f32 bits.
fn delta_dequant8(p: DeltaPart) -> array<vec4<u32>, 2> {
    let delta = select(IQ1_DELTA, -IQ1_DELTA, p.neg);
    let lo = p.dl * (vec4<f32>(sbytes4(p.g.x)) + delta);
    let hi = p.dl * (vec4<f32>(sbytes4(p.g.y)) + delta);
    return bits8(lo, hi);
}

// The bytes 8 g + 1 (or 8 g - 1 where `neg`) of the word `g` of grid bytes -1, 0, 1: g + 1 per
// byte as (g & 3) + 1 masked to 2 bits (no byte carries), times 8, then less 7 (or 9) per byte.
fn delta_codes(g: u32, neg: bool) -> u32 {
    let u = (((g & 0x03030303u) + 0x01010101u) & 0x03030303u) << 3u;
    return sub_bytes(u, select(0x07070707u, 0x09090909u, neg));
}

// The part on the integer path (kernels/matvec_q8.wgsl, chunk_int8.wgsl): codes q = 8 g ± 1 and
// d = dl / 8 (a power of two: exact, and no subnormal as |dl| >= 2^-24), so d * q is the value
// exactly (m = 0).
fn delta_qpart8(p: DeltaPart) -> vec4<u32> {
    return qpart(delta_codes(p.g.x, p.neg), delta_codes(p.g.y, p.neg), p.dl * 0.125, 0.0);
}

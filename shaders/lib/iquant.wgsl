// Shared helpers of the i-quant grid formats (IQ2_*, IQ3_*). CPU twins: the sign handling and the
// `(db * g[j]) * ±1` products in src/formats/iquant/{iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s}.rs.

// ggml `ksigns_iq2xs[k]` (7-bit sign index to 8-bit mask) without a table: bit 7 makes the number
// of set bits even, `k | parity(k) << 7`. tests/shaders_layout_sync.rs checks all 128 entries.
fn ksigns_iq2xs(k: u32) -> u32 {
    return k | ((countOneBits(k) & 1u) << 7u);
}

// +1.0 or -1.0 for bits k0 .. k0+4 of the sign mask `s` (set bit: negative).
fn signs4(s: u32, k0: u32) -> vec4<f32> {
    return select(vec4<f32>(1.0), vec4<f32>(-1.0), bits4(s, k0) == vec4<u32>(1u));
}

// Eight values `(db * g[j]) * sign_j` as f32 bits: g = the unsigned bytes of g8.x (elements 0..4)
// and g8.y (elements 4..8), sign_j = bit j of the mask `s`. The CPU's operation order: the product
// db * g is rounded first, then multiplied by ±1 (exact). Every product here is exact anyway (see
// the format files), so neither order nor FMA contraction can change a bit.
fn grid_signed8(db: f32, g8: vec2<u32>, s: u32) -> array<vec4<u32>, 2> {
    let lo = (db * vec4<f32>(bytes4(g8.x))) * signs4(s, 0u);
    let hi = (db * vec4<f32>(bytes4(g8.y))) * signs4(s, 4u);
    return bits8(lo, hi);
}

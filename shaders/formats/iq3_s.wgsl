// IQ3_S (ggml id 21): 256 values in 110 bytes. Spec: formats.md §4.18. CPU twin: src/formats/iquant/iq3_s.rs
// Thread mapping: shared entry, 32 invocations per block; `part` = 4 * ib + l is one 8-value sign
// group of sub-block ib (two 4-value grid entries, signs[part]), so each invocation does two grid
// lookups and writes 8 contiguous values.
// Exact on every GPU: db = d * (1 + 2 sc) has at most 11 + 5 significant bits; db * g with g in
// {1, 3, ..., 15} (4 bits) at most 20; * ±1 is exact. No step rounds, so FMA cannot change a bit.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 110u;
const IQ3_S_D: u32 = 0u;         // f16 super-scale
const IQ3_S_QS: u32 = 2u;        // [64]: low 8 bits of the 9-bit grid indices
const IQ3_S_QH: u32 = 66u;       // [8]: 9th index bits, one byte per sub-block
const IQ3_S_SIGNS: u32 = 74u;    // [32]: explicit 8-bit sign masks
const IQ3_S_SCALES: u32 = 106u;  // [4]: two 4-bit scales per byte

fn grid_part(base: u32, part: u32) -> GridPart {
    let ib = part >> 2u;
    let l = part & 3u;
    let sc = (load_u8(base + IQ3_S_SCALES + (ib >> 1u)) >> (4u * (ib & 1u))) & 0xFu;
    let d = f16_le(base + IQ3_S_D);
    let db = d * f32(1u + 2u * sc);
    let qh = load_u8(base + IQ3_S_QH + ib);
    let q = base + IQ3_S_QS + 2u * part;     // 8 * ib + 2 * l
    let i0 = load_u8(q) | (((qh >> (2u * l)) & 1u) << 8u);
    let i1 = load_u8(q + 1u) | (((qh >> (2u * l + 1u)) & 1u) << 8u);
    let g = vec2<u32>(grid32(IQ3S_GRID_AT, i0), grid32(IQ3S_GRID_AT, i1));
    return GridPart(db, g, load_u8(base + IQ3_S_SIGNS + part));
}

// dequant8 and the integer path's qpart8 (QPART8_MIN false) read this part: lib/grid_parts.wgsl.
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale per 32 values).
const QPART8_GROUP: u32 = 4u;

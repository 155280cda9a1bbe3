// IQ2_S (ggml id 22): 256 values in 82 bytes. Spec: formats.md §4.16. CPU twin: src/formats/iquant/iq2_s.rs
// Thread mapping: shared entry, 32 invocations per block; `part` = 4 * ib + l is one 8-value grid
// group (qs[part], signs[part]), so each invocation does one grid lookup and writes 8 contiguous
// values.
// Exact on every GPU: as IQ2_XXS, (d * (0.5 + nib)) * 0.25 and db * g (g in {8, 25, 43}) have at
// most 22 significant bits and * ±1 is exact, so no step rounds and FMA cannot change a bit.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 82u;
const IQ2_S_D: u32 = 0u;        // f16 super-scale
const IQ2_S_QS: u32 = 2u;       // [32]: low 8 bits of the 10-bit grid indices
const IQ2_S_SIGNS: u32 = 34u;   // [32]: explicit 8-bit sign masks
const IQ2_S_QH: u32 = 66u;      // [8]: high 2 bits of the indices, one byte per sub-block
const IQ2_S_SCALES: u32 = 74u;  // [8]: two 4-bit scales per sub-block

fn grid_part(base: u32, part: u32) -> GridPart {
    let ib = part >> 2u;
    let l = part & 3u;
    let qh = load_u8(base + IQ2_S_QH + ib);
    let idx = load_u8(base + IQ2_S_QS + part) | (((qh >> (2u * l)) & 3u) << 8u);
    let nib = (load_u8(base + IQ2_S_SCALES + ib) >> (4u * (l >> 1u))) & 0xFu;
    let d = f16_le(base + IQ2_S_D);
    let db = (d * (0.5 + f32(nib))) * 0.25;
    return GridPart(db, grid64(IQ2S_GRID_AT, idx), load_u8(base + IQ2_S_SIGNS + part));
}

// dequant8 and the integer path's qpart8 (QPART8_MIN false) read this part: lib/grid_parts.wgsl.
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale per 16 values).
const QPART8_GROUP: u32 = 2u;

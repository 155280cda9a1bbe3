// IQ2_XS (ggml id 17): 256 values in 74 bytes. Spec: formats.md §4.15. CPU twin: src/formats/iquant/iq2_xs.rs
// Thread mapping: shared entry, 32 invocations per block; `part` = 4 * ib + l is one 8-value grid
// group (its u16 is qs[part]), so each invocation does one grid lookup and writes 8 contiguous
// values.
// Exact on every GPU: as IQ2_XXS, (d * (0.5 + nib)) * 0.25 and db * g (g in {8, 25, 43}) have at
// most 22 significant bits and * ±1 is exact, so no step rounds and FMA cannot change a bit.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 74u;
const IQ2_XS_D: u32 = 0u;        // f16 super-scale
const IQ2_XS_QS: u32 = 2u;       // u16[32]: 9-bit grid index, 7-bit sign index
const IQ2_XS_SCALES: u32 = 66u;  // [8]: two 4-bit scales per sub-block (groups 0,1 low; 2,3 high)

fn grid_part(base: u32, part: u32) -> GridPart {
    let ib = part >> 2u;
    let l = part & 3u;
    let v = load_u16(base + IQ2_XS_QS + 2u * part);
    let nib = (load_u8(base + IQ2_XS_SCALES + ib) >> (4u * (l >> 1u))) & 0xFu;
    let d = f16_le(base + IQ2_XS_D);
    let db = (d * (0.5 + f32(nib))) * 0.25;
    let g = grid64(IQ2XS_GRID_AT, v & 511u);
    return GridPart(db, g, ksigns_iq2xs((v >> 9u) & 127u));
}

// dequant8 and the integer path's qpart8 (QPART8_MIN false) read this part: lib/grid_parts.wgsl.
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale per 16 values).
const QPART8_GROUP: u32 = 2u;

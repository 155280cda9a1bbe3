// IQ3_XXS (ggml id 18): 256 values in 98 bytes. Spec: formats.md §4.17. CPU twin: src/formats/iquant/iq3_xxs.rs
// Thread mapping: shared entry, 32 invocations per block; `part` = 4 * ib + l is one 8-value sign
// group of sub-block ib (two 4-value grid entries), so each invocation does two grid lookups and
// writes 8 contiguous values.
// Exact on every GPU: (d * (0.5 + ls)) * 0.5 has at most 16 significant bits (no f32 subnormal);
// db * g with g in {4, 12, ..., 52, 62} (6 bits) at most 22; * ±1 is exact. No step rounds, so
// operation order and FMA contraction cannot change a bit.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 98u;
const IQ3_XXS_D: u32 = 0u;                  // f16 super-scale
const IQ3_XXS_QS: u32 = 2u;                 // [64]: 8-bit grid indices, 8 per sub-block
const IQ3_XXS_SCALES_AND_SIGNS: u32 = 66u;  // u32 LE per sub-block: 4 x 7-bit sign index, scale

fn grid_part(base: u32, part: u32) -> GridPart {
    let ib = part >> 2u;
    let l = part & 3u;
    let aux = load_u32(base + IQ3_XXS_SCALES_AND_SIGNS + 4u * ib);
    let d = f16_le(base + IQ3_XXS_D);
    let db = (d * (0.5 + f32(aux >> 28u))) * 0.5;
    let q = base + IQ3_XXS_QS + 2u * part;   // 8 * ib + 2 * l
    let g = vec2<u32>(grid32(IQ3XXS_GRID_AT, load_u8(q)), grid32(IQ3XXS_GRID_AT, load_u8(q + 1u)));
    return GridPart(db, g, ksigns_iq2xs((aux >> (7u * l)) & 127u));
}

// dequant8 and the integer path's qpart8 (QPART8_MIN false) read this part: lib/grid_parts.wgsl.
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale per 32 values).
const QPART8_GROUP: u32 = 4u;

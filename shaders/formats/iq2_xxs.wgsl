// IQ2_XXS (ggml id 16): 256 values in 66 bytes. Spec: formats.md §4.14. CPU twin: src/formats/iquant/iq2_xxs.rs
// Thread mapping: shared entry, 32 invocations per block; `part` = 4 * ib + l is one 8-value grid
// group l of sub-block ib, so each invocation does one grid lookup and writes 8 contiguous values.
// Exact on every GPU: 0.5 + ls (ls < 16) is exact; d * (0.5 + ls) has at most 11 + 5 significant
// bits and * 0.25 is a power of two (no f32 subnormal: |d| >= 2^-24); db * g with g in
// {8, 25, 43} (6 bits) has at most 22; * ±1 is exact. Every rounding step is exact, so operation
// order and FMA contraction cannot change a bit.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 66u;
const IQ2_XXS_D: u32 = 0u;    // f16 super-scale
const IQ2_XXS_QS: u32 = 2u;   // 8 bytes per sub-block: four 8-bit grid indices, then `aux`
const SUB_BYTES: u32 = 8u;    // qs bytes per sub-block (Rust QS_PER_SUB)
const SUB_AUX: u32 = 4u;      // `aux` (Rust AUX): u32 LE, four 7-bit sign indices, 4-bit scale

fn grid_part(base: u32, part: u32) -> GridPart {
    let ib = part >> 2u;
    let l = part & 3u;
    let sub = base + IQ2_XXS_QS + SUB_BYTES * ib;
    let aux = load_u32(sub + SUB_AUX);
    let d = f16_le(base + IQ2_XXS_D);
    let db = (d * (0.5 + f32(aux >> 28u))) * 0.25;
    let g = grid64(IQ2XXS_GRID_AT, load_u8(sub + l));
    return GridPart(db, g, ksigns_iq2xs((aux >> (7u * l)) & 127u));
}

// dequant8 and the integer path's qpart8 (QPART8_MIN false) read this part: lib/grid_parts.wgsl.
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale per 32 values).
const QPART8_GROUP: u32 = 4u;

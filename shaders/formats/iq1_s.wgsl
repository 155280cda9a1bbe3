// IQ1_S (ggml id 19): 256 values in 50 bytes. Spec: formats.md §4.19. CPU twin: src/formats/iquant/iq1_s.rs
// Thread mapping: shared entry, 32 invocations per block; `part` = 4 * ib + l is one 8-value grid
// group of sub-block ib (qs[part]), so each invocation does one grid lookup and writes 8
// contiguous values.
// Exact on every GPU: dl = d * (2 s + 1) has at most 11 + 4 significant bits; g + delta with g in
// {-1, 0, 1} and delta = ±0.125 is exact (±0.125, ±0.875, ±1.125: 4 bits); dl * (g + delta) has
// at most 19 and no f32 subnormal (|d| >= 2^-24). The CPU's order dl * (g + delta) is kept; as
// every step is exact, even a distributed dl * g + dl * delta or an FMA would give the same bits.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 50u;
const IQ1_S_D: u32 = 0u;    // f16 super-scale
const IQ1_S_QS: u32 = 2u;   // [32]: low 8 bits of the 11-bit grid indices
const IQ1_S_QH: u32 = 34u;  // u16[8] LE: four 3-bit index extensions, 3-bit scale, delta sign

fn delta_part(base: u32, part: u32) -> DeltaPart {
    let ib = part >> 2u;
    let l = part & 3u;
    let h = load_u16(base + IQ1_S_QH + 2u * ib);
    let d = f16_le(base + IQ1_S_D);
    let dl = d * f32(2u * ((h >> 12u) & 7u) + 1u);
    let idx = load_u8(base + IQ1_S_QS + part) | (((h >> (3u * l)) & 7u) << 8u);
    return DeltaPart(dl, grid64(IQ1S_GRID_AT, idx), (h & 0x8000u) != 0u);
}

// dequant8 and the integer path's qpart8 (QPART8_MIN false) read this part: lib/delta_parts.wgsl.
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale per 32 values).
const QPART8_GROUP: u32 = 4u;

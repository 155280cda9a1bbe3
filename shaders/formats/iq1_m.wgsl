// IQ1_M (ggml id 29): 256 values in 56 bytes. Spec: formats.md §4.20. CPU twin: src/formats/iquant/iq1_m.rs
// Thread mapping: shared entry, 32 invocations per block; `part` = 4 * ib + l is one 8-value grid
// group of sub-block ib (qs[part], nibble part of qh), so each invocation does one grid lookup and
// writes 8 contiguous values.
// Exact on every GPU: the f16 super-scale is assembled from the scale nibbles and decoded with
// integer operations (subnormal, Inf and NaN codes included); then as IQ1_S, dl = d * (2 s + 1)
// and dl * (g + delta) are exact for finite d (at most 19 significant bits, no f32 subnormal), so
// order and FMA contraction cannot change a bit. Inf or NaN d give Inf or NaN as on the CPU.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 56u;
const IQ1_M_QS: u32 = 0u;       // [32]: low 8 bits of the 11-bit grid indices
const IQ1_M_QH: u32 = 32u;      // [16]: one nibble per group: 3 index bits, delta sign (bit 3)
const IQ1_M_SCALES: u32 = 48u;  // 4 x u16 LE: 3-bit scales in bits 0..12, f16 scale nibbles above

fn delta_part(base: u32, part: u32) -> DeltaPart {
    let ib = part >> 2u;
    let l = part & 3u;
    let sc = base + IQ1_M_SCALES;
    let dbits = (load_u16(sc) >> 12u) | ((load_u16(sc + 2u) >> 8u) & 0x00F0u)
        | ((load_u16(sc + 4u) >> 4u) & 0x0F00u) | (load_u16(sc + 6u) & 0xF000u);
    let d = f16_bits(dbits);
    let w = load_u16(sc + 2u * (ib >> 1u)) >> (6u * (ib & 1u));
    let dl = d * f32(2u * ((w >> (3u * (l >> 1u))) & 7u) + 1u);
    let hb = load_u8(base + IQ1_M_QH + (part >> 1u)) >> (4u * (l & 1u));   // qh[2 * ib + l / 2]
    let idx = load_u8(base + IQ1_M_QS + part) | ((hb & 7u) << 8u);
    return DeltaPart(dl, grid64(IQ1S_GRID_AT, idx), (hb & 8u) != 0u);
}

// dequant8 and the integer path's qpart8 (QPART8_MIN false) read this part: lib/delta_parts.wgsl.
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale per 16 values).
const QPART8_GROUP: u32 = 2u;

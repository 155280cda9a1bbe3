// IQ4_XS (ggml id 23): 256 values in 136 bytes. Spec: formats.md §4.22. CPU twin: src/formats/iquant/iq4_xs.rs
// Thread mapping: shared entry, 32 invocations per block; `part` = 4 * ib + q is a quarter of
// sub-block ib: the low (q = 0, 1) or high (q = 2, 3) nibbles of 8 of its 16 code bytes, i.e. 8
// contiguous values, as IQ4_NL. Codes index KVALUES_IQ4NL through lib/lookup.wgsl.
// Exact on every GPU: dl = d * (ls - 32) has at most 11 + 5 significant bits (|ls - 32| <= 32),
// dl * kvalue (|kvalue| <= 127, 7 bits) at most 23, no f32 subnormal. One rounding-free product
// per step, so FMA contraction cannot change a bit.

const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 136u;
const IQ4_XS_D: u32 = 0u;         // f16 super-scale
const IQ4_XS_SCALES_H: u32 = 2u;  // u16 LE: high 2 bits of the eight 6-bit scales
const IQ4_XS_SCALES_L: u32 = 4u;  // [4]: low 4 bits of the scales, two per byte
const IQ4_XS_QS: u32 = 8u;        // [128]: 16 bytes per sub-block, low nibbles first
const KVALUES: vec4<u32> = KVALUES_IQ4NL; // the codes' table (lib/lookup.wgsl)

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let ib = part >> 2u;
    let q = part & 3u;
    let lo4 = (load_u8(base + IQ4_XS_SCALES_L + (ib >> 1u)) >> (4u * (ib & 1u))) & 0xFu;
    let ls = lo4 | (((load_u16(base + IQ4_XS_SCALES_H) >> (2u * ib)) & 3u) << 4u);
    let d = f16_le(base + IQ4_XS_D);
    let dl = d * f32(i32(ls) - 32);
    let at = base + IQ4_XS_QS + 16u * ib + 8u * (q & 1u);
    let sh = 4u * (q >> 1u);
    let lo = lookup4_f32(bytes4((load_word(at) >> sh) & 0x0F0F0F0Fu));
    let hi = lookup4_f32(bytes4((load_word(at + 4u) >> sh) & 0x0F0F0F0Fu));
    return bits8(dl * lo, dl * hi);
}

// The integer path (kernels/matvec_q8.wgsl): part p as int8 codes q and f32 d, its values
// d * q (m = 0); the same fields as dequant8.
const QPART8_MIN: bool = false;
// Consecutive parts sharing qpart8's d and m, from a multiple of it (one scale and min per 32 values or more).
const QPART8_GROUP: u32 = 4u;

fn qpart8(base: u32, part: u32) -> vec4<u32> {
    let ib = part >> 2u;
    let q = part & 3u;
    let lo4 = (load_u8(base + IQ4_XS_SCALES_L + (ib >> 1u)) >> (4u * (ib & 1u))) & 0xFu;
    let ls = lo4 | (((load_u16(base + IQ4_XS_SCALES_H) >> (2u * ib)) & 3u) << 4u);
    let dl = f16_le(base + IQ4_XS_D) * f32(i32(ls) - 32);
    let at = base + IQ4_XS_QS + 16u * ib + 8u * (q & 1u);
    let sh = 4u * (q >> 1u);
    let lo = lookup4_i8(bytes4((load_word(at) >> sh) & 0x0F0F0F0Fu));
    let hi = lookup4_i8(bytes4((load_word(at + 4u) >> sh) & 0x0F0F0F0Fu));
    return qpart(lo, hi, dl, 0.0);
}

// NVFP4 (ggml id 40): 64 values in 36 bytes. Spec: formats.md §4.26. CPU twin: src/formats/fp4/nvfp4.rs
// Thread mapping: 8 invocations per block, 8 values each: part p = 2s + h takes nibble h of
// qs[8s .. 8s+8] of sub-block s, scaled by D = ue4m3_half(d[s]) (y[16s + 8h ..]).
// Exact on every GPU: kvalue * D multiplies two values of at most 4 significant bits, and the
// smallest nonzero |D| is 2^-10, so there is neither rounding nor a subnormal.

const BLOCK_ELEMS: u32 = 64u;
const BLOCK_BYTES: u32 = 36u;
const NVFP4_D: u32 = 0u;    // 4 UE4M3 sub-block scales
const NVFP4_QS: u32 = 4u;   // 32 bytes of E2M1 codes, 8 per 16-value sub-block
const KVALUES: vec4<u32> = KVALUES_FP4; // the codes' table (lib/lookup.wgsl)

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let s = part >> 1u;
    let dd = ue4m3_half(load_u8(base + NVFP4_D + s));
    let at = base + NVFP4_QS + 8u * s;
    let sh = 4u * (part & 1u);
    let lo = lookup4_f32(bytes4((load_word(at) >> sh) & 0x0F0F0F0Fu));
    let hi = lookup4_f32(bytes4((load_word(at + 4u) >> sh) & 0x0F0F0F0Fu));
    return bits8(lo * dd, hi * dd);
}

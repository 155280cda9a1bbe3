// MXFP4 (ggml id 39): 32 values in 17 bytes. Spec: formats.md §4.25. CPU twin: src/formats/fp4/mxfp4.rs
// Thread mapping: as Q4_0, 4 invocations per block, 8 values each (low nibbles y[0..16], high
// nibbles y[16..32]); the 17-byte blocks are read from the tile at any byte alignment.
// No float arithmetic: kvalues_fp4[c] * 2^(e-128) is assembled as f32 bits by
// fp4_e8m0_half_bits, so the subnormal results of e = 0 and e = 1 (scales 2^-128, 2^-127) are the
// CPU's exact values even on GPUs that flush f32 subnormals (tests/gpu_vs_cpu.rs checks this).

const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 17u;
const MXFP4_E: u32 = 0u;    // E8M0 shared exponent
const MXFP4_QS: u32 = 1u;   // 16 bytes of E2M1 codes: low nibbles y[0..16], high nibbles y[16..32]

fn fp4x4(c: vec4<u32>, e: u32) -> vec4<u32> {
    return vec4<u32>(
        fp4_e8m0_half_bits(c.x, e),
        fp4_e8m0_half_bits(c.y, e),
        fp4_e8m0_half_bits(c.z, e),
        fp4_e8m0_half_bits(c.w, e),
    );
}

fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2> {
    let e = load_u8(base + MXFP4_E);
    let at = base + MXFP4_QS + 8u * (part & 1u);
    let sh = 4u * (part >> 1u);
    let q = (load_u32x2(at) >> vec2<u32>(sh)) & vec2<u32>(0x0F0F0F0Fu);
    let lo = bytes4(q.x);
    let hi = bytes4(q.y);
    return array<vec4<u32>, 2>(fp4x4(lo, e), fp4x4(hi, e));
}

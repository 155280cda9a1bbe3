// Output: little-endian f16, round to nearest even from the f32 bits (integer operations, no
// pack2x16float), two values per u32 word (stored by store_pairs.wgsl).
// CPU twin: cpu::dequant_to_bytes with DType::F16.

fn pack_pair(lo: u32, hi: u32) -> u32 {
    return f32_bits_to_f16(lo) | (f32_bits_to_f16(hi) << 16u);
}

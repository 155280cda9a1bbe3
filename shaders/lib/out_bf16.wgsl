// Output: little-endian bf16, round to nearest even from the f32 bits (integer operations, no
// pack2x16float), two values per u32 word (stored by store_pairs.wgsl).
// CPU twin: cpu::dequant_to_bytes with DType::BF16.

fn pack_pair(lo: u32, hi: u32) -> u32 {
    return f32_bits_to_bf16(lo) | (f32_bits_to_bf16(hi) << 16u);
}

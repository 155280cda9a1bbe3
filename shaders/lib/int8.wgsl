// Packed int8 codes: the helpers of the integer matvec path (every format's qpart8, composed
// after bytes.wgsl into every decoder; quantize_q8.wgsl). A part is 8 values d * q + m with q
// small integers, q[j] the signed byte j % 4 of word j / 4. The formats with a min (QPART8_MIN:
// Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) have unsigned codes below 128 (their bits masked out of the
// block), which qpart_values and chunk_factored.wgsl read as unsigned bytes.

// qpart8's result: the two words of codes, then d and m as f32 bits.
fn qpart(lo: u32, hi: u32, d: f32, m: f32) -> vec4<u32> {
    return vec4<u32>(lo, hi, bitcast<u32>(d), bitcast<u32>(m));
}

// Each byte of `w` (all below 0x80) less the byte of `c` (each at most 0x80) as int8 lanes:
// the bytes are offset by 0x80 first, so no lane borrows from the next.
fn sub_bytes(w: u32, c: u32) -> u32 {
    return ((w | 0x80808080u) - c) ^ 0x80808080u;
}

// Bits 0..4 of `b` as bit 0 of bytes 0..4: one multiply, (b & 15)·0x00204081 puts bit j at
// 8j (and, for b < 16, at no other byte's bit 0).
fn spread4(b: u32) -> u32 {
    return ((b & 15u) * 0x00204081u) & 0x01010101u;
}

// Four int8 lanes packed into one word, lane k in byte k.
fn pack_i8(v: vec4<i32>) -> u32 {
    let u = bitcast<vec4<u32>>(v) & vec4<u32>(0xFFu);
    return u.x | (u.y << 8u) | (u.z << 16u) | (u.w << 24u);
}

// The bytes of `g` (each 1..127) negated where bit j of `s` is set (j < 4; higher bits ignored),
// as int8 lanes: per byte (g ^ 0xFF) + 1, which carries into no other byte since no byte is 0.
// 0xFF per such byte is (ones << 8) - ones (no 32-bit multiply, a quarter-rate instruction on
// AMD).
fn neg_bytes(g: u32, s: u32) -> u32 {
    let ones = spread4(s);
    return (g ^ ((ones << 8u) - ones)) + ones;
}

// half.wgsl's functions through the device's own conversion (`unpack2x16float`: one instruction
// per value, where half.wgsl takes about ten). Composed in half.wgsl's place by the matvec
// kernels' `hw_f16` variant only (src/gpu/kernels/family/matvec.rs), which an engine picks on a
// device whose conversion it probed to give every f16 but NaN its exact f32 value, subnormals
// included, and NaN for NaN (src/gpu/device.rs, `exact_f16`). A NaN's payload may differ from
// half.wgsl's: sums do not see it, so no bit-exact decoder (get_rows, dequant) composes this.
// Needs naga's SHADER_FLOAT16_IN_FLOAT32 (wgpu's downlevel flag SHADER_F16_IN_F32).

fn f16_to_f32_bits(h: u32) -> u32 {
    return bitcast<u32>(unpack2x16float(h).x);
}

// The two binary16 of `w` (low half first) as f32 bits.
fn f16x2_bits(w: u32) -> vec2<u32> {
    return bitcast<vec2<u32>>(unpack2x16float(w));
}

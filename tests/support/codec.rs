//! The CPU codecs as the tests call them, and comparisons of decoded values that treat any NaN as
//! equal to any NaN.

use gguf_dequant::{cpu, DType, Format};

/// Equal bits, or both NaN.
pub fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// `src` decoded to f32 by the CPU codecs.
pub fn decode(format: Format, src: &[u8]) -> Vec<f32> {
    let mut y = vec![0.0; format.values_for(src.len()).unwrap()];
    cpu::dequant_into(format, src, &mut y).unwrap();
    y
}

/// `src` decoded to little-endian `dtype` bytes by the CPU codecs: the reference bytes.
pub fn cpu(format: Format, src: &[u8], dtype: DType) -> Vec<u8> {
    let n = format.values_for(src.len()).unwrap();
    let mut out = vec![0u8; n * dtype.size()];
    cpu::dequant_to_bytes(format, src, dtype, &mut out).unwrap();
    out
}

/// Whether raw `dtype` bits `v` are a NaN.
pub fn is_nan(dtype: DType, v: u32) -> bool {
    match dtype {
        DType::F32 => v & 0x7FFF_FFFF > 0x7F80_0000,
        DType::F16 => v & 0x7FFF > 0x7C00,
        DType::BF16 => v & 0x7FFF > 0x7F80,
    }
}

/// The value `i` of little-endian `dtype` bytes, as raw bits.
pub fn value(dtype: DType, bytes: &[u8], i: usize) -> u32 {
    match dtype {
        DType::F32 => u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap()),
        _ => u16::from_le_bytes(bytes[2 * i..2 * i + 2].try_into().unwrap()) as u32,
    }
}

/// Bit-for-bit equality of two decoded buffers (any NaN equals any NaN); the error names the
/// block and element of the first difference and counts the rest.
pub fn compare(format: Format, dtype: DType, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{format} to {dtype}: {} bytes from the GPU, {} from the CPU",
            got.len(),
            want.len()
        ));
    }
    let n = want.len() / dtype.size();
    let mut first = None;
    let mut count = 0;
    for i in 0..n {
        let (g, c) = (value(dtype, got, i), value(dtype, want, i));
        if g != c && !(is_nan(dtype, g) && is_nan(dtype, c)) {
            count += 1;
            first.get_or_insert((i, g, c));
        }
    }
    match first {
        None => Ok(()),
        Some((i, g, c)) => Err(format!(
            "{format} to {dtype}: {count} of {n} values differ; first: block {} element {}: GPU {g:#x}, CPU {c:#x}",
            i / format.block_elems(),
            i % format.block_elems()
        )),
    }
}

/// [`compare`] of f32 values: bit-for-bit, any NaN equal to any NaN (GPUs may canonicalise NaN
/// payloads in arithmetic: NVIDIA's driver gives 0x7FFFFFFF for d · q with a NaN d).
pub fn compare_f32(format: Format, got: &[f32], want: &[f32]) -> Result<(), String> {
    compare(
        format,
        DType::F32,
        bytemuck::cast_slice(got),
        bytemuck::cast_slice(want),
    )
}

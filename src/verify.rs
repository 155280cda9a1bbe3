//! Two decodes of the same values compared bit for bit ([`compare`], needing no feature); with the
//! `gpu` feature, GPU output against the CPU codecs for blocks and whole files (what the `verify`
//! and `selftest` commands run).

use crate::DType;
#[cfg(feature = "gpu")]
use crate::{cpu, formats::Format, gguf::GgufFile, gpu::GpuEngine, Result};

/// Values decoded per GPU call while verifying, so that host memory stays bounded whatever the
/// tensor size (two buffers of this many values of the output dtype).
#[cfg(feature = "gpu")]
pub const CHUNK_VALUES: usize = 1 << 22;

/// How two decodes of the same values differ.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Values compared.
    pub n_values: u64,
    /// Values whose bits differ (two NaNs count as equal, whatever their payloads).
    pub mismatches: u64,
    /// Largest absolute difference between two numbers that differ (0 when none; NaN against a
    /// number counts as a mismatch but not here).
    pub max_abs_diff: f64,
    /// Largest distance in units in the last place of the output dtype.
    pub max_ulp: u64,
    /// Index of the first differing value.
    pub first_mismatch: Option<u64>,
}

impl Comparison {
    /// No value differs.
    pub fn ok(&self) -> bool {
        self.mismatches == 0
    }

    /// Folds in the comparison of the next `other.n_values` values.
    #[cfg(feature = "gpu")]
    fn extend(&mut self, other: Comparison) {
        if self.first_mismatch.is_none() {
            self.first_mismatch = other.first_mismatch.map(|i| i + self.n_values);
        }
        self.n_values += other.n_values;
        self.mismatches += other.mismatches;
        self.max_abs_diff = self.max_abs_diff.max(other.max_abs_diff);
        self.max_ulp = self.max_ulp.max(other.max_ulp);
    }
}

/// One value of `dtype`: its bits widened to u32, its sign bit, and its value.
fn element(dtype: DType, bytes: &[u8]) -> (u32, u32, f64) {
    match dtype {
        DType::F32 => {
            let bits = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            (bits, 1 << 31, f32::from_bits(bits) as f64)
        }
        DType::F16 => {
            let bits = u16::from_le_bytes([bytes[0], bytes[1]]);
            (bits as u32, 1 << 15, half::f16::from_bits(bits).to_f64())
        }
        DType::BF16 => {
            let bits = u16::from_le_bytes([bytes[0], bytes[1]]);
            (bits as u32, 1 << 15, half::bf16::from_bits(bits).to_f64())
        }
    }
}

/// Maps float bits to integers in the order of the values they encode (−0 and +0 adjacent), so
/// that the difference of two is their distance in ulps.
fn ordered(bits: u32, sign: u32) -> i64 {
    let mag = (bits & (sign - 1)) as i64;
    if bits & sign != 0 {
        -mag
    } else {
        mag
    }
}

/// Compares two little-endian buffers of `dtype` values (`got` against `want`).
pub fn compare(dtype: DType, got: &[u8], want: &[u8]) -> Comparison {
    let mut c = Comparison::default();
    for (i, (g, w)) in got
        .chunks_exact(dtype.size())
        .zip(want.chunks_exact(dtype.size()))
        .enumerate()
    {
        c.n_values += 1;
        if g == w {
            continue;
        }
        let (gb, sign, gv) = element(dtype, g);
        let (wb, _, wv) = element(dtype, w);
        if gv.is_nan() && wv.is_nan() {
            continue;
        }
        c.mismatches += 1;
        c.first_mismatch.get_or_insert(i as u64);
        if gv.is_nan() || wv.is_nan() {
            continue;
        }
        let diff = (gv - wv).abs();
        if diff.is_finite() {
            c.max_abs_diff = c.max_abs_diff.max(diff);
        }
        c.max_ulp = c.max_ulp.max(ordered(gb, sign).abs_diff(ordered(wb, sign)));
    }
    c
}

/// The check of one tensor.
#[cfg(feature = "gpu")]
#[derive(Clone, Debug, PartialEq)]
pub struct TensorCheck {
    /// The tensor's name.
    pub name: String,
    /// Its ggml type.
    pub format: Format,
    /// Whether the GPU decoded it (false: the format has no shader, only the CPU codecs ran).
    pub gpu: bool,
    /// GPU against CPU.
    pub comparison: Comparison,
}

/// Decodes `src` (whole blocks of `format`) on the GPU and with the CPU codecs, `CHUNK_VALUES` at a
/// time, and compares the two.
#[cfg(feature = "gpu")]
pub fn check_blocks(
    engine: &GpuEngine,
    format: Format,
    src: &[u8],
    dtype: DType,
) -> Result<Comparison> {
    let chunk_blocks = (CHUNK_VALUES / format.block_elems()).max(1);
    let mut total = Comparison::default();
    let mut want = Vec::new();
    for chunk in src.chunks(chunk_blocks * format.block_bytes()) {
        let got = engine.dequant(format, chunk, dtype)?;
        want.clear();
        want.resize(got.len(), 0);
        cpu::dequant_to_bytes(format, chunk, dtype, &mut want)?;
        total.extend(compare(dtype, &got, &want));
    }
    Ok(total)
}

/// Checks every tensor of `file` (in file order): GPU against CPU for formats with a shader;
/// formats without one are listed with `gpu: false`. `progress` is called with each tensor's
/// quantised bytes once it is checked.
#[cfg(feature = "gpu")]
pub fn verify_file(
    file: &GgufFile,
    engine: &GpuEngine,
    dtype: DType,
    progress: &dyn Fn(u64),
) -> Result<Vec<TensorCheck>> {
    let mut checks = Vec::with_capacity(file.tensors().len());
    for t in file.tensors() {
        let gpu = t.format.has_shader();
        let comparison = if gpu {
            check_blocks(engine, t.format, file.tensor_data(t), dtype)?
        } else {
            Comparison {
                n_values: t.n_elements,
                ..Comparison::default()
            }
        };
        file.release_tensor(t, 0, t.n_bytes);
        checks.push(TensorCheck {
            name: t.name.clone(),
            format: t.format,
            gpu,
            comparison,
        });
        progress(t.n_bytes);
    }
    Ok(checks)
}

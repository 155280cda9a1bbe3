//! The `selftest` command's embedded sample: a few blocks of every format, built into the binary
//! from a fixed seed, decoded on the chosen adapter and checked against the CPU codecs; and, with no
//! adapter, the CPU codecs alone checked against digests recorded in `src/selftest_digests.txt`.

use sha2::{Digest, Sha256};

use crate::formats::sample::finite_blocks;
use crate::formats::Format;
#[cfg(feature = "gpu")]
use crate::gpu::GpuEngine;
#[cfg(feature = "gpu")]
use crate::verify::{self, Comparison};
#[cfg(feature = "gpu")]
use crate::DType;
use crate::{cpu, Result};

/// Blocks of each block format in the sample: odd, so that no format's blocks pair up evenly.
pub const SAMPLE_BLOCKS: usize = 7;

/// Values of each one-value format (F32, F16, …) in the sample: odd as well.
pub const SAMPLE_VALUES: usize = 231;

/// Blocks of `format` in its sample.
pub fn sample_len(format: Format) -> usize {
    if format.block_elems() == 1 {
        SAMPLE_VALUES
    } else {
        SAMPLE_BLOCKS
    }
}

/// SHA-256 of the CPU codecs' f32 output on each format's sample, one `NAME HEX` line per format,
/// recorded from codecs that the oracle tests check bit-for-bit against ggml.
pub const CPU_DIGESTS: &str = include_str!("selftest_digests.txt");

/// `format`'s sample: [`sample_len`] blocks of [`finite_blocks`] from a per-format seed.
pub fn sample_blocks(format: Format) -> Vec<u8> {
    finite_blocks(
        format,
        sample_len(format),
        0x5EED_0000_0000_0000 ^ u64::from(format.id()),
    )
}

/// The sample of one format on the GPU against the CPU codecs.
#[cfg(feature = "gpu")]
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSample {
    /// The format.
    pub format: Format,
    /// f32 output compared.
    pub f32: Comparison,
    /// f16 output compared.
    pub f16: Comparison,
}

#[cfg(feature = "gpu")]
impl GpuSample {
    /// Both outputs bit-identical.
    pub fn ok(&self) -> bool {
        self.f32.ok() && self.f16.ok()
    }
}

/// Runs the sample of every format with a shader on `engine`.
#[cfg(feature = "gpu")]
pub fn run_gpu(engine: &GpuEngine) -> Result<Vec<GpuSample>> {
    crate::formats::WITH_SHADER
        .iter()
        .map(|&format| {
            let src = sample_blocks(format);
            Ok(GpuSample {
                format,
                f32: verify::check_blocks(engine, format, &src, DType::F32)?,
                f16: verify::check_blocks(engine, format, &src, DType::F16)?,
            })
        })
        .collect()
}

/// The hex SHA-256 of the CPU codecs' little-endian f32 output on `format`'s sample.
pub fn cpu_digest(format: Format) -> Result<String> {
    let values = cpu::dequant_f32(format, &sample_blocks(format))?;
    let mut hash = Sha256::new();
    for v in values {
        hash.update(v.to_le_bytes());
    }
    Ok(format!("{:x}", hash.finalize()))
}

/// The recorded digest of `format`'s sample, if any.
pub fn recorded_digest(format: Format) -> Option<&'static str> {
    CPU_DIGESTS.lines().find_map(|line| {
        let (name, hex) = line.split_once(' ')?;
        (name == format.name()).then_some(hex.trim())
    })
}

/// Every format's CPU decode of its sample against the recorded digest: `(format, matches)`.
pub fn run_cpu() -> Result<Vec<(Format, bool)>> {
    Format::ALL
        .iter()
        .map(|&f| Ok((f, recorded_digest(f) == Some(cpu_digest(f)?.as_str()))))
        .collect()
}

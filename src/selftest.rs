//! The `selftest` command's embedded sample: a few blocks of every format, built into the binary
//! from a fixed seed, decoded on the chosen adapter and checked against the CPU codecs; and, with no
//! adapter, the CPU codecs alone checked against digests recorded in `src/selftest_digests.txt`.

use sha2::{Digest, Sha256};

use crate::formats::field::FieldKind;
use crate::formats::Format;
use crate::gpu::GpuEngine;
use crate::verify::{self, Comparison};
use crate::{cpu, DType, Result};

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

/// `n_blocks` pseudo-random blocks of `format` (splitmix64 from `seed`) whose f16 and f32 scale
/// fields are finite, as ggml's validator requires of real files. One-value formats keep every bit
/// pattern, NaN and Inf included.
pub fn finite_blocks(format: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    let spec = format.spec();
    let mut state = seed;
    let len = n_blocks * spec.bytes;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        bytes.extend_from_slice(&z.to_le_bytes());
    }
    bytes.truncate(len);
    for block in bytes.chunks_exact_mut(spec.bytes) {
        for field in spec.fields {
            // Clearing the exponent's second-highest bit turns an all-ones exponent (Inf/NaN)
            // into a finite one.
            let high = match field.kind {
                FieldKind::F16 => field.offset + 1,
                FieldKind::F32 => field.offset + 3,
                _ => continue,
            };
            if let Some(b) = block.get_mut(high) {
                *b &= !0x40;
            }
        }
    }
    bytes
}

/// The sample of one format on the GPU against the CPU codecs.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSample {
    /// The format.
    pub format: Format,
    /// f32 output compared.
    pub f32: Comparison,
    /// f16 output compared.
    pub f16: Comparison,
}

impl GpuSample {
    /// Both outputs bit-identical.
    pub fn ok(&self) -> bool {
        self.f32.ok() && self.f16.ok()
    }
}

/// Runs the sample of every format with a shader on `engine`.
pub fn run_gpu(engine: &GpuEngine) -> Result<Vec<GpuSample>> {
    Format::ALL
        .iter()
        .filter(|&&f| GpuEngine::supports(f))
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

//! The cross-vendor benchmark behind `gguf-dequant bench`: GPU dequantisation throughput per
//! adapter × format × output dtype, next to a buffer copy of the same traffic on the same adapter
//! (the roofline) and the CPU codecs on the same data.
//!
//! # What is measured, and how
//!
//! * **Data.** Each format gets [`BenchConfig::n_values`] values (the same count for every format
//!   and dtype) of deterministic random blocks ([`random_blocks`]) whose scale fields are finite
//!   and normal, so no decoder runs into Inf/NaN/subnormal arithmetic. The blocks are uploaded
//!   once per adapter; the output buffer is GPU-resident and never read back.
//! * **GPU time.** One [`GpuEngine::record`](crate::gpu::GpuEngine::record) of the whole tensor
//!   per run, measured by [`GpuTimer`](crate::gpu::timing::GpuTimer): GPU timestamp queries
//!   written around the recorded work when the adapter has them (`timing: "timestamp"`), else
//!   the wall clock around submit-and-wait (`"wall"`, which also counts submission and
//!   synchronisation). Recording is never timed. The figure is the median of
//!   [`BenchConfig::runs`] (at least 5) runs after [`BenchConfig::warmup`] warm-up runs.
//! * **Traffic.** `bytes_in` = the quantised blocks read, `bytes_out` = the values written
//!   (`n_values × dtype size`). Effective bandwidth `gb_per_s` = `(bytes_in + bytes_out) / seconds`
//!   / 10⁹.
//! * **Copy roofline.** On the same adapter, in the same run, `copy_buffer_to_buffer` of
//!   `copy_bytes` = `(bytes_in + bytes_out) / 2` (rounded up to 4) bytes, timed the same way. A
//!   copy reads and writes `copy_bytes` each, so it moves the same total traffic as the
//!   dequantisation, and `copy_gb_per_s` = `2 × copy_bytes / copy_seconds` / 10⁹ counts read +
//!   written bytes exactly like `gb_per_s`. `ratio_to_copy` = `gb_per_s / copy_gb_per_s`: 1.0
//!   means the shader moves its bytes as fast as the adapter copies memory.
//! * **CPU.** [`crate::cpu::dequant_to_bytes_with`] on the same blocks into the same dtype, one
//!   thread (`cpu_1t_gb_per_s`) and rayon's pool on every core (`cpu_mt_gb_per_s`), with the same
//!   traffic definition, median of the same number of runs. The CPU figures do not depend on the
//!   adapter; they are measured once per format and dtype and repeated on each adapter's row.
//! * **Formats without a shader** (F64 and the integer types) have no GPU row:
//!   they appear once with `adapter: null`, the GPU fields `null` and the CPU figures, when a
//!   caller names them ([`BenchConfig::formats`]); "all" in the CLI means every format with a
//!   shader.
//!
//! Everything here but [`random_blocks`] and [`values_for_mib`] needs the `gpu` feature. A
//! [`BenchReport`] is plain data: the command line renders it as a table, JSON or an SVG chart.

use crate::formats::field::FieldKind;
use crate::Format;

#[cfg(feature = "gpu")]
mod measure;
#[cfg(feature = "gpu")]
pub use measure::*;

/// Values in `mib` MiB of f32, rounded up to a multiple of 256 (at least 256).
pub fn values_for_mib(mib: f64) -> u64 {
    let v = (mib.max(0.0) * (1u64 << 18) as f64).ceil() as u64;
    v.div_ceil(256).max(1) * 256
}

/// `n_blocks` deterministic random blocks of `format` (xorshift64* from `seed`) whose f16/f32
/// scale fields are finite and normal (MXFP4's E8M0 exponent kept within 2⁻⁶⁴..2⁶³, IQ1_M's
/// hidden f16 scale likewise), so that no decoder meets Inf, NaN or subnormal arithmetic.
pub fn random_blocks(format: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    let spec = format.spec();
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut v = vec![0u8; n_blocks * spec.bytes];
    for c in v.chunks_mut(8) {
        let x = next().to_le_bytes();
        c.copy_from_slice(&x[..c.len()]);
    }
    // One-value formats: finite, normal values as well (the CPU widens them through f32).
    match format {
        Format::F32 => {
            for w in v.chunks_exact_mut(4) {
                let x = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                let bits = (x & 0x807F_FFFF) | ((100 + (x >> 8) % 56) << 23);
                w.copy_from_slice(&bits.to_le_bytes());
            }
        }
        Format::F16 => {
            for w in v.chunks_exact_mut(2) {
                let x = u16::from_le_bytes([w[0], w[1]]);
                let h = (x & 0x83FF) | ((1 + (x >> 10) % 30) << 10);
                w.copy_from_slice(&h.to_le_bytes());
            }
        }
        Format::BF16 => {
            for w in v.chunks_exact_mut(2) {
                let x = u16::from_le_bytes([w[0], w[1]]);
                let h = (x & 0x807F) | ((100 + (x >> 7) % 56) << 7);
                w.copy_from_slice(&h.to_le_bytes());
            }
        }
        Format::F8_E4M3 => {
            for b in v.iter_mut() {
                *b = (*b & 0x87) | ((1 + (*b >> 3) % 14) << 3);
            }
        }
        _ => {}
    }
    for b in v.chunks_exact_mut(spec.bytes) {
        for f in spec.fields {
            match f.kind {
                FieldKind::F16 => {
                    let x = next();
                    let exp = 1 + (x >> 16) % 30;
                    let h = ((x & 0x8000) | (exp << 10) | (x & 0x3FF)) as u16;
                    b[f.offset..f.offset + 2].copy_from_slice(&h.to_le_bytes());
                }
                FieldKind::F32 => {
                    let x = next() as u32;
                    let bits = (x & 0x807F_FFFF) | ((100 + (x >> 8) % 56) << 23);
                    b[f.offset..f.offset + 4].copy_from_slice(&bits.to_le_bytes());
                }
                FieldKind::Uint if format == Format::MXFP4 => {
                    b[f.offset] = 64 + (next() % 128) as u8;
                }
                _ => {}
            }
        }
        if format == Format::IQ1_M {
            b[spec.bytes - 1] &= 0xBF;
        }
    }
    v
}

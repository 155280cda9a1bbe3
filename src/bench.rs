//! The cross-vendor benchmark behind `gguf-dequant bench`: GPU dequantisation throughput per
//! adapter × format × output dtype, next to a buffer copy of the same traffic on the same adapter
//! (the roofline) and the CPU codecs on the same data.
//!
//! # What is measured, and how
//!
//! * **Data.** Each format gets [`BenchConfig::n_values`] values (the same count for every format
//!   and dtype) of deterministic random blocks ([`crate::formats::sample::normal_blocks`]) whose scale fields are finite
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
//! A [`BenchReport`] is plain data: the command line renders it as a table, JSON or an SVG chart.

mod measure;
pub use measure::*;

/// Values in `mib` MiB of f32, rounded up to a multiple of 256 (at least 256).
pub fn values_for_mib(mib: f64) -> u64 {
    let v = (mib.max(0.0) * (1u64 << 18) as f64).ceil() as u64;
    v.div_ceil(256).max(1) * 256
}

//! The cross-vendor benchmark behind `gguf-dequant bench`: GPU dequantisation throughput per
//! adapter × format × output dtype, next to two rooflines of the same traffic on the same adapter
//! (a buffer copy and a shader copy) and the CPU codecs on the same data; and, when asked for
//! ([`BenchConfig::kernels`]), the inference kernels (matvec, matmul, get_rows) on weights of real
//! models' shapes ([`kernels`] says what those rows measure).
//!
//! # What is measured, and how
//!
//! * **Data.** Each format gets [`BenchConfig::n_values`] values (the same count for every format
//!   and dtype) of deterministic random blocks ([`crate::formats::sample::normal_blocks`]) whose scale fields are finite
//!   and normal, so no decoder runs into Inf/NaN/subnormal arithmetic. The blocks are uploaded
//!   once into each source buffer of the rotation (below); the outputs are GPU-resident and
//!   never read back.
//! * **GPU time.** Each timed run is one command buffer that records the dequantisation of the
//!   whole tensor once per buffer pair of the rotation (below), measured by
//!   [`GpuTimer`](crate::gpu::timing::GpuTimer): GPU timestamp queries written around the
//!   recorded work when the adapter has them (`timing: "timestamp"`), else the wall clock around
//!   submit-and-wait (`"wall"`, which also counts submission and synchronisation). Recording is
//!   never timed. `seconds` is the median of [`BenchConfig::runs`] (at least 5) timed runs after
//!   [`BenchConfig::warmup`] warm-up runs, divided by the number of pairs.
//! * **Time budget** ([`budget`], [`BenchConfig::budget`], 1 s by default): a measurement that
//!   would take longer (where the adapter is slow, e.g. a CPU adapter's matmul) is sized by one
//!   untimed probe run to fit: fewer pairs, then fewer runs (at least 3; the probe alone where
//!   one call takes the whole budget). Every row reports its own runs and pairs.
//! * **Rotation.** So that the adapter's caches cannot hold what a run reads, each timed run goes
//!   through `pairs` distinct source/output buffer pairs, each holding the same blocks: the
//!   fewest with `pairs × traffic ≥ target`, the target 1 GiB on a discrete GPU and 256 MiB on
//!   any other adapter ([`rotation::target_for`]; [`BenchConfig::rotation_target`] overrides it),
//!   at most [`rotation::MAX_PAIRS`] and at most [`rotation::HOST_CAP`] bytes of buffers alive
//!   ([`rotation::plan_rotation`]). The copy and the shader copy rotate through as many pairs.
//! * **Traffic.** `bytes_in` = the quantised blocks read, `bytes_out` = the values written
//!   (`n_values × dtype size`). Effective bandwidth `gb_per_s` = `(bytes_in + bytes_out) / seconds`
//!   / 10⁹.
//! * **Copy roofline.** On the same adapter, in the same run, `copy_buffer_to_buffer` of
//!   `copy_bytes` = `(bytes_in + bytes_out) / 2` (rounded up to 4) bytes, timed the same way. A
//!   copy reads and writes `copy_bytes` each, so it moves the same total traffic as the
//!   dequantisation, and `copy_gb_per_s` = `2 × copy_bytes / copy_seconds` / 10⁹ counts read +
//!   written bytes exactly like `gb_per_s`. `ratio_to_copy` = `gb_per_s / copy_gb_per_s`: 1.0
//!   means the shader moves its bytes as fast as the adapter copies memory.
//! * **Shader-copy roofline.** On a software adapter a buffer copy is a `memcpy`, 20–100× faster
//!   than any shader there, so the same run also times
//!   [`ShaderCopy`](crate::gpu::roofline::ShaderCopy): a WGSL streaming kernel that reads the
//!   quantised bytes and writes the output bytes with the dequantisers' vec4 stores, workgroups,
//!   grid and windows, and decodes nothing (its output is checked on every adapter before the
//!   run). `shader_copy_gb_per_s` = `shader_copy_bytes / shader_copy_seconds` / 10⁹, and
//!   `ratio_to_shader_copy` = `gb_per_s / shader_copy_gb_per_s`: the cost of decoding over
//!   moving the bytes. On a discrete GPU both rooflines should agree.
//! * **CPU.** [`crate::cpu::dequant_to_bytes_with`] on the same blocks into the same dtype, one
//!   thread (`cpu_1t_gb_per_s`) and rayon's pool on every core (`cpu_mt_gb_per_s`), with the same
//!   traffic definition, median of the same number of runs. The CPU figures do not depend on the
//!   adapter; they are measured once per format and dtype and repeated on each adapter's row.
//! * **Formats without a shader** (F64 and the integer types) have no GPU row:
//!   they appear once with `adapter: null`, the GPU fields `null` and the CPU figures, when a
//!   caller names them ([`BenchConfig::formats`]); "all" in the CLI means every format with a
//!   shader.
//!
//! * **Kernels** ([`kernels`]): per adapter × format × weight shape, the dequantisation of that
//!   tensor to f32 as above (the reference, with its rooflines), then each kernel over a rotation
//!   of distinct weight copies planned with the same targets on the weight's bytes.
//!
//! A [`BenchReport`] is plain data: the command line renders it as a table, JSON or an SVG chart.

pub mod budget;
pub mod kernels;
pub mod rotation;
mod run;
mod timing;

pub use run::{
    model_blocks, run, AdapterReport, BenchConfig, BenchReport, BenchResult, Step, DEFAULT_RUNS,
    MIN_RUNS,
};
pub use timing::{BenchAdapter, CopyCase, GpuCase, GpuFigures};

/// Values in `mib` MiB of f32, rounded up to a multiple of 256 (at least 256).
pub fn values_for_mib(mib: f64) -> u64 {
    let v = (mib.max(0.0) * (1u64 << 18) as f64).ceil() as u64;
    v.div_ceil(256).max(1) * 256
}

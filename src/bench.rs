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
//! * **GPU time.** One [`GpuEngine::record`] of the whole tensor per run, measured by
//!   [`GpuTimer`]: GPU timestamp queries written around the recorded work when the adapter has
//!   them (`timing: "timestamp"`), else the wall clock around submit-and-wait (`"wall"`, which
//!   also counts submission and synchronisation). Recording is never timed. The figure is the
//!   median of [`BenchConfig::runs`] (at least 5) runs after [`BenchConfig::warmup`] warm-up runs.
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

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};

use crate::formats::field::FieldKind;
use crate::gpu::timing::{GpuTimer, Timing};
use crate::gpu::{compute_adapters, windows, DequantJob, EngineOptions, GpuEngine, GpuError};
use crate::Backend;
use crate::{cpu, DType, Error, Format, Result};

/// Default number of timed runs per measurement.
pub const DEFAULT_RUNS: usize = 7;
/// The fewest timed runs a measurement takes.
pub const MIN_RUNS: usize = 5;

/// What to benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    /// Formats; those without a shader get CPU figures only.
    pub formats: Vec<Format>,
    /// Output dtypes.
    pub dtypes: Vec<DType>,
    /// Values per format (rounded up to whole blocks of 256 values by [`BenchConfig::new`]).
    pub n_values: u64,
    /// Timed runs per measurement (at least [`MIN_RUNS`]); the median is reported.
    pub runs: usize,
    /// Untimed runs before them.
    pub warmup: usize,
    /// Measure the CPU codecs too.
    pub cpu: bool,
}

impl BenchConfig {
    /// `formats` × `dtypes` with `mib` MiB of f32 output per format (`mib × 2¹⁸` values, rounded
    /// up to a multiple of 256 so that every format decodes the same count), [`DEFAULT_RUNS`]
    /// runs after one warm-up, CPU figures included.
    pub fn new(formats: Vec<Format>, dtypes: Vec<DType>, mib: f64) -> BenchConfig {
        BenchConfig {
            formats,
            dtypes,
            n_values: values_for_mib(mib),
            runs: DEFAULT_RUNS,
            warmup: 1,
            cpu: true,
        }
    }
}

/// Values in `mib` MiB of f32, rounded up to a multiple of 256 (at least 256).
pub fn values_for_mib(mib: f64) -> u64 {
    let v = (mib.max(0.0) * (1u64 << 18) as f64).ceil() as u64;
    v.div_ceil(256).max(1) * 256
}

/// Every format with a GPU shader, in registry order.
pub fn gpu_formats() -> Vec<Format> {
    Format::ALL
        .iter()
        .copied()
        .filter(|&f| f.has_shader())
        .collect()
}

/// An adapter opened for benchmarking: an engine on its own device (with timestamp queries when
/// the adapter has them) and a timer.
#[derive(Debug)]
pub struct BenchAdapter {
    /// The engine.
    pub engine: GpuEngine,
    /// Its timer.
    pub timer: GpuTimer,
}

impl BenchAdapter {
    /// Opens every compute adapter of `backend` (`all`), or the best one; `wall` times with the
    /// wall clock even where the adapter has timestamp queries.
    pub fn open(backend: Backend, all: bool, wall: bool) -> Result<Vec<BenchAdapter>> {
        let mut adapters = compute_adapters(backend)?;
        if !all {
            adapters.truncate(1);
        }
        adapters
            .iter()
            .map(|a| {
                let engine = GpuEngine::from_adapter(a, EngineOptions::default())?;
                let timer = if wall {
                    GpuTimer::wall()
                } else {
                    GpuTimer::new(&engine)?
                };
                Ok(BenchAdapter { engine, timer })
            })
            .collect()
    }

    /// The adapter as it appears in the report.
    pub fn report(&self) -> AdapterReport {
        let info = self.engine.adapter_info();
        AdapterReport {
            name: info.name.clone(),
            backend: info.backend.to_string().to_lowercase(),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info)
                .trim()
                .to_string(),
            timing: self.timer.timing(),
        }
    }
}

/// One adapter of a report.
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterReport {
    /// Adapter name.
    pub name: String,
    /// `vulkan`, `gl`, `metal`, `dx12`.
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu`, `Other`.
    pub device_type: String,
    /// Driver name and version.
    pub driver: String,
    /// How its GPU times were measured.
    pub timing: Timing,
}

/// One (adapter, format, dtype) row.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchResult {
    /// Index into [`BenchReport::adapters`]; `None` for a format without a shader (CPU only).
    pub adapter: Option<usize>,
    /// The format.
    pub format: Format,
    /// Output dtype.
    pub dtype: DType,
    /// Values decoded.
    pub n_values: u64,
    /// Quantised bytes read.
    pub bytes_in: u64,
    /// Output bytes written.
    pub bytes_out: u64,
    /// GPU figures; `None` for a format without a shader.
    pub gpu: Option<GpuFigures>,
    /// CPU codecs, one thread, GB/s of `bytes_in + bytes_out`.
    pub cpu_1t_gb_per_s: Option<f64>,
    /// CPU codecs, all threads.
    pub cpu_mt_gb_per_s: Option<f64>,
}

/// The GPU side of a [`BenchResult`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuFigures {
    /// Median seconds of one dequantisation.
    pub seconds: f64,
    /// Bytes the copy read (and wrote): `(bytes_in + bytes_out) / 2`, rounded up to 4.
    pub copy_bytes: u64,
    /// Median seconds of the copy.
    pub copy_seconds: f64,
    /// How both were measured.
    pub timing: Timing,
}

impl BenchResult {
    /// `(bytes_in + bytes_out) / seconds` in GB/s.
    pub fn gb_per_s(&self) -> Option<f64> {
        self.gpu
            .map(|g| gbps(self.bytes_in + self.bytes_out, g.seconds))
    }

    /// `2 × copy_bytes / copy_seconds` in GB/s.
    pub fn copy_gb_per_s(&self) -> Option<f64> {
        self.gpu.map(|g| gbps(2 * g.copy_bytes, g.copy_seconds))
    }

    /// [`BenchResult::gb_per_s`] ÷ [`BenchResult::copy_gb_per_s`].
    pub fn ratio_to_copy(&self) -> Option<f64> {
        Some(self.gb_per_s()? / self.copy_gb_per_s()?)
    }
}

fn gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds.max(1e-12) / 1e9
}

/// A whole benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// The adapters, indexed by [`BenchResult::adapter`].
    pub adapters: Vec<AdapterReport>,
    /// Rows: adapter-major, then format, then dtype; CPU-only formats last.
    pub results: Vec<BenchResult>,
    /// Timed runs per measurement.
    pub runs: usize,
    /// Threads of the CPU "all threads" figure.
    pub cpu_threads: usize,
}

/// A step of [`run`], for progress reports.
#[derive(Clone, Copy, Debug)]
pub struct Step<'a> {
    /// Steps finished before this one.
    pub done: u64,
    /// All steps.
    pub total: u64,
    /// What this step measures (`"Q4_0 f16 on llvmpipe (vulkan)"`, `"Q4_0 f16 on the CPU"`).
    pub what: &'a str,
}

/// Runs `config` on `adapters`, calling `progress` before each step.
pub fn run(
    config: &BenchConfig,
    adapters: &[BenchAdapter],
    progress: &dyn Fn(Step<'_>),
) -> Result<BenchReport> {
    let runs = config.runs.max(MIN_RUNS);
    let n_values = config.n_values.div_ceil(256).max(1) * 256;
    let shader: Vec<Format> = config
        .formats
        .iter()
        .copied()
        .filter(|&f| f.has_shader())
        .collect();
    let pairs = (config.formats.len() * config.dtypes.len()) as u64;
    let total =
        (adapters.len() * shader.len() * config.dtypes.len()) as u64 + pairs * config.cpu as u64;
    let mut done = 0u64;
    let mut step = |what: String| {
        progress(Step {
            done,
            total,
            what: &what,
        });
        done += 1;
    };

    // CPU figures first, once per (format, dtype).
    let mut cpu_figs = Vec::new();
    for &format in &config.formats {
        let src = random_blocks(format, n_values as usize / format.block_elems(), 1);
        for &dtype in &config.dtypes {
            let figs = if config.cpu {
                step(format!("{format} {dtype} on the CPU"));
                let traffic = src.len() as u64 + n_values * dtype.size() as u64;
                let one = time_cpu(format, dtype, &src, Some(1), config.warmup, runs)?;
                let all = time_cpu(format, dtype, &src, None, config.warmup, runs)?;
                (Some(gbps(traffic, one)), Some(gbps(traffic, all)))
            } else {
                (None, None)
            };
            cpu_figs.push(((format, dtype), figs));
        }
    }
    let cpu_of = |format: Format, dtype: DType| {
        cpu_figs
            .iter()
            .find(|(k, _)| *k == (format, dtype))
            .map_or((None, None), |(_, v)| *v)
    };

    let mut results = Vec::new();
    for (index, adapter) in adapters.iter().enumerate() {
        let info = adapter.engine.adapter_info();
        let label = format!(
            "{} ({})",
            info.name,
            info.backend.to_string().to_lowercase()
        );
        for &format in &shader {
            let n_blocks = n_values / format.block_elems() as u64;
            let src = random_blocks(format, n_blocks as usize, 1);
            for &dtype in &config.dtypes {
                step(format!("{format} {dtype} on {label}"));
                let gpu = time_gpu(adapter, format, dtype, &src, config.warmup, runs)?;
                let (cpu_1t, cpu_mt) = cpu_of(format, dtype);
                results.push(BenchResult {
                    adapter: Some(index),
                    format,
                    dtype,
                    n_values,
                    bytes_in: src.len() as u64,
                    bytes_out: n_values * dtype.size() as u64,
                    gpu: Some(gpu),
                    cpu_1t_gb_per_s: cpu_1t,
                    cpu_mt_gb_per_s: cpu_mt,
                });
            }
        }
    }
    for &format in config.formats.iter().filter(|&&f| !f.has_shader()) {
        for &dtype in &config.dtypes {
            let (cpu_1t, cpu_mt) = cpu_of(format, dtype);
            results.push(BenchResult {
                adapter: None,
                format,
                dtype,
                n_values,
                bytes_in: n_values / format.block_elems() as u64 * format.block_bytes() as u64,
                bytes_out: n_values * dtype.size() as u64,
                gpu: None,
                cpu_1t_gb_per_s: cpu_1t,
                cpu_mt_gb_per_s: cpu_mt,
            });
        }
    }
    Ok(BenchReport {
        adapters: adapters.iter().map(BenchAdapter::report).collect(),
        results,
        runs,
        cpu_threads: rayon::current_num_threads(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median seconds of the CPU codecs decoding `src` to `dtype` on `threads`.
fn time_cpu(
    format: Format,
    dtype: DType,
    src: &[u8],
    threads: Option<usize>,
    warmup: usize,
    runs: usize,
) -> Result<f64> {
    let n = cpu::n_values(format, src.len())?;
    // u32 storage keeps the f32 fast path (decoding in place) available, as a real caller's
    // aligned buffer would.
    let mut words = vec![0u32; (n * dtype.size()).div_ceil(4)];
    let dst = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut words)[..n * dtype.size()];
    let mut times = Vec::with_capacity(runs);
    for i in 0..warmup + runs {
        let t = Instant::now();
        cpu::dequant_to_bytes_with(format, src, dtype, dst, threads)?;
        if i >= warmup {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    Ok(median(times))
}

/// Creates a buffer holding `data` (padded with zeros to `size`).
fn buffer_with(
    engine: &GpuEngine,
    label: &str,
    data: &[u8],
    size: u64,
    usage: wgpu::BufferUsages,
) -> Result<wgpu::Buffer> {
    let device = engine.device();
    let size = size.max(data.len() as u64).max(4).div_ceil(4) * 4;
    let buffer = crate::gpu::scoped(device, &format!("allocating {label}"), || {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: true,
        })
    })?;
    {
        let mut view = buffer
            .get_mapped_range_mut(..)
            .map_err(|e| GpuError::Map(format!("{label}: {e}")))?;
        view.slice(..data.len()).copy_from_slice(data);
        view.slice(data.len()..).fill(0);
    }
    buffer.unmap();
    Ok(buffer)
}

/// One dequantisation, GPU-resident: the raw blocks uploaded once, the output buffer allocated
/// once, each [`GpuCase::run`] one timed [`GpuEngine::record`] of the whole tensor.
pub struct GpuCase<'a> {
    adapter: &'a BenchAdapter,
    format: Format,
    dtype: DType,
    n_blocks: u64,
    src: wgpu::Buffer,
    dst: wgpu::Buffer,
}

impl<'a> GpuCase<'a> {
    /// Uploads `blocks` (whole blocks of `format`) to `adapter` and compiles the pipeline.
    pub fn new(
        adapter: &'a BenchAdapter,
        format: Format,
        dtype: DType,
        blocks: &[u8],
    ) -> Result<GpuCase<'a>> {
        let engine = &adapter.engine;
        engine.prepare(format, dtype)?;
        let n_blocks = cpu::n_values(format, blocks.len())? as u64 / format.block_elems() as u64;
        let (src_len, dst_len) = windows::padded(format, n_blocks, dtype.size() as u64);
        let storage = wgpu::BufferUsages::STORAGE;
        Ok(GpuCase {
            adapter,
            format,
            dtype,
            n_blocks,
            src: buffer_with(engine, "bench source", blocks, src_len, storage)?,
            dst: buffer_with(engine, "bench output", &[], dst_len, storage)?,
        })
    }

    /// Quantised bytes read plus output bytes written by one run.
    pub fn traffic(&self) -> u64 {
        self.n_blocks
            * (self.format.block_bytes() + self.format.block_elems() * self.dtype.size()) as u64
    }

    /// One timed dequantisation: seconds, and how they were measured.
    pub fn run(&self) -> Result<(f64, Timing)> {
        let engine = &self.adapter.engine;
        let job = DequantJob {
            format: self.format,
            dtype: self.dtype,
            src: &self.src,
            src_offset: 0,
            n_blocks: self.n_blocks,
            dst: &self.dst,
            dst_offset: 0,
        };
        self.adapter
            .timer
            .time(engine, |encoder| engine.record(encoder, &job))
    }
}

/// A `copy_buffer_to_buffer` of `bytes` bytes between two buffers of one adapter.
pub struct CopyCase<'a> {
    adapter: &'a BenchAdapter,
    bytes: u64,
    src: wgpu::Buffer,
    dst: wgpu::Buffer,
}

impl<'a> CopyCase<'a> {
    /// Buffers for a copy of `bytes` (rounded up to 4) bytes; the source starts with `fill`, then
    /// zeros.
    pub fn new(adapter: &'a BenchAdapter, bytes: u64, fill: &[u8]) -> Result<CopyCase<'a>> {
        let bytes = bytes.max(4).div_ceil(4) * 4;
        let engine = &adapter.engine;
        let fill = &fill[..fill.len().min(bytes as usize)];
        Ok(CopyCase {
            adapter,
            bytes,
            src: buffer_with(
                engine,
                "bench copy source",
                fill,
                bytes,
                wgpu::BufferUsages::COPY_SRC,
            )?,
            dst: buffer_with(
                engine,
                "bench copy destination",
                &[],
                bytes,
                wgpu::BufferUsages::COPY_DST,
            )?,
        })
    }

    /// Bytes copied (read, and again written).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// One timed copy.
    pub fn run(&self) -> Result<(f64, Timing)> {
        self.adapter.timer.time(&self.adapter.engine, |encoder| {
            encoder.copy_buffer_to_buffer(&self.src, 0, &self.dst, 0, self.bytes);
            Ok(())
        })
    }
}

/// Median seconds of `runs` runs of `f` after `warmup` untimed ones, and how they were timed.
fn median_of(
    warmup: usize,
    runs: usize,
    mut f: impl FnMut() -> Result<(f64, Timing)>,
) -> Result<(f64, Timing)> {
    let mut times = Vec::with_capacity(runs);
    let mut how = Timing::Wall;
    for i in 0..warmup + runs {
        let (t, h) = f()?;
        how = h;
        if i >= warmup {
            times.push(t);
        }
    }
    Ok((median(times), how))
}

/// GPU time of `format` → `dtype` on `adapter`, and of the matching copy.
fn time_gpu(
    adapter: &BenchAdapter,
    format: Format,
    dtype: DType,
    src: &[u8],
    warmup: usize,
    runs: usize,
) -> Result<GpuFigures> {
    let (seconds, timing) = {
        let case = GpuCase::new(adapter, format, dtype, src)?;
        median_of(warmup, runs, || case.run())?
    };
    let bytes_out = cpu::n_values(format, src.len())? as u64 * dtype.size() as u64;
    let copy = CopyCase::new(adapter, (src.len() as u64 + bytes_out).div_ceil(2), src)?;
    let (copy_seconds, _) = median_of(warmup, runs, || copy.run())?;
    Ok(GpuFigures {
        seconds,
        copy_bytes: copy.bytes(),
        copy_seconds,
        timing,
    })
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

fn opt(x: Option<f64>) -> Value {
    x.filter(|v| v.is_finite())
        .map_or(Value::Null, |v| json!(v))
}

impl BenchReport {
    /// The report as JSON:
    /// `{"adapters": [{"name", "backend", "device_type", "driver", "timing"}], "results":
    /// [{"adapter", "backend", "type", "dtype", "n_values", "bytes_in", "bytes_out", "seconds",
    /// "gb_per_s", "copy_bytes", "copy_seconds", "copy_gb_per_s", "ratio_to_copy",
    /// "cpu_1t_gb_per_s", "cpu_mt_gb_per_s", "timing"}], "runs", "cpu_threads"}`. `adapter` is the
    /// index into `adapters` (names repeat across backends: lavapipe and llvmpipe GL are both
    /// "llvmpipe"); GPU fields are `null` on CPU-only rows.
    pub fn to_json(&self) -> Value {
        let adapters: Vec<Value> = self
            .adapters
            .iter()
            .map(|a| {
                json!({"name": a.name, "backend": a.backend, "device_type": a.device_type,
                       "driver": a.driver, "timing": a.timing.name()})
            })
            .collect();
        let results: Vec<Value> = self
            .results
            .iter()
            .map(|r| {
                let g = r.gpu;
                json!({
                    "adapter": r.adapter,
                    "backend": r.adapter.map(|i| self.adapters[i].backend.clone()),
                    "type": r.format.name(),
                    "dtype": r.dtype.name(),
                    "n_values": r.n_values,
                    "bytes_in": r.bytes_in,
                    "bytes_out": r.bytes_out,
                    "seconds": opt(g.map(|g| g.seconds)),
                    "gb_per_s": opt(r.gb_per_s()),
                    "copy_bytes": g.map(|g| g.copy_bytes),
                    "copy_seconds": opt(g.map(|g| g.copy_seconds)),
                    "copy_gb_per_s": opt(r.copy_gb_per_s()),
                    "ratio_to_copy": opt(r.ratio_to_copy()),
                    "cpu_1t_gb_per_s": opt(r.cpu_1t_gb_per_s),
                    "cpu_mt_gb_per_s": opt(r.cpu_mt_gb_per_s),
                    "timing": g.map(|g| g.timing.name()),
                })
            })
            .collect();
        json!({"adapters": adapters, "results": results, "runs": self.runs,
               "cpu_threads": self.cpu_threads})
    }

    /// The human-readable table: one section per adapter, then the CPU-only formats.
    pub fn write_table(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let f = |x: Option<f64>, prec: usize| match x {
            Some(v) if v.is_finite() => format!("{v:.prec$}"),
            _ => "-".to_string(),
        };
        let header = |out: &mut dyn Write| {
            writeln!(
                out,
                "{:<8} {:<5} {:>9} {:>8} {:>8} {:>9} {:>8} {:>9} {:>6} {:>8} {:>8}",
                "type",
                "dtype",
                "values",
                "in MiB",
                "out MiB",
                "ms",
                "GB/s",
                "copy GB/s",
                "ratio",
                "cpu 1t",
                format!("cpu {}t", self.cpu_threads)
            )
        };
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        for (i, a) in self.adapters.iter().enumerate() {
            writeln!(
                out,
                "adapter {i}: {} ({}, {}, driver {}); GPU times from {}",
                a.name,
                a.backend,
                a.device_type,
                a.driver,
                match a.timing {
                    Timing::Timestamp => "timestamp queries",
                    Timing::Wall => "the wall clock around submit-and-wait",
                }
            )?;
            header(out)?;
            for r in self.results.iter().filter(|r| r.adapter == Some(i)) {
                writeln!(
                    out,
                    "{:<8} {:<5} {:>9} {:>8.2} {:>8.2} {:>9} {:>8} {:>9} {:>6} {:>8} {:>8}",
                    r.format.name(),
                    r.dtype.name(),
                    r.n_values,
                    mib(r.bytes_in),
                    mib(r.bytes_out),
                    f(r.gpu.map(|g| g.seconds * 1e3), 3),
                    f(r.gb_per_s(), 2),
                    f(r.copy_gb_per_s(), 2),
                    f(r.ratio_to_copy(), 2),
                    f(r.cpu_1t_gb_per_s, 2),
                    f(r.cpu_mt_gb_per_s, 2),
                )?;
            }
            writeln!(out)?;
        }
        let cpu_only: Vec<&BenchResult> = self.results.iter().filter(|r| r.gpu.is_none()).collect();
        if !cpu_only.is_empty() {
            writeln!(out, "CPU only (no GPU shader):")?;
            header(out)?;
            for r in cpu_only {
                writeln!(
                    out,
                    "{:<8} {:<5} {:>9} {:>8.2} {:>8.2} {:>9} {:>8} {:>9} {:>6} {:>8} {:>8}",
                    r.format.name(),
                    r.dtype.name(),
                    r.n_values,
                    mib(r.bytes_in),
                    mib(r.bytes_out),
                    "-",
                    "-",
                    "-",
                    "-",
                    f(r.cpu_1t_gb_per_s, 2),
                    f(r.cpu_mt_gb_per_s, 2),
                )?;
            }
            writeln!(out)?;
        }
        writeln!(
            out,
            "GB/s = (bytes in + bytes out) / time, median of {} runs; copy = copy_buffer_to_buffer \
             of (in + out) / 2 bytes on the same adapter (same read + written traffic); \
             ratio = GB/s / copy GB/s",
            self.runs
        )?;
        Ok(())
    }

    /// Draws GB/s per format, one bar per adapter (and the CPU on all threads), with each
    /// adapter's copy bandwidth as a dashed line; one panel per dtype. SVG, text left to the
    /// viewer's fonts (no font files needed to render).
    pub fn write_svg(&self, path: &Path) -> Result<()> {
        svg::draw(self, path).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })
    }
}

mod svg {
    use plotters::prelude::*;

    use super::BenchReport;
    use crate::{DType, Format};

    const PALETTE: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(188, 189, 34),
    ];
    const CPU_COLOUR: RGBColor = RGBColor(127, 127, 127);

    pub(super) fn draw(
        report: &BenchReport,
        path: &std::path::Path,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let mut dtypes: Vec<DType> = Vec::new();
        let mut formats: Vec<Format> = Vec::new();
        for r in report.results.iter().filter(|r| r.gpu.is_some()) {
            if !dtypes.contains(&r.dtype) {
                dtypes.push(r.dtype);
            }
            if !formats.contains(&r.format) {
                formats.push(r.format);
            }
        }
        if dtypes.is_empty() {
            return Err("no GPU results to draw".into());
        }
        let panel_h = 420u32;
        let width = (220 + 70 * formats.len() as u32).max(900);
        let root =
            SVGBackend::new(path, (width, panel_h * dtypes.len() as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((dtypes.len(), 1));
        let n_bars = report.adapters.len() + 1;
        for (panel, &dtype) in panels.iter().zip(&dtypes) {
            let rows = |f: Format, a: Option<usize>| {
                report
                    .results
                    .iter()
                    .find(|r| r.format == f && r.dtype == dtype && (a.is_none() || r.adapter == a))
            };
            // Log scale: on a software adapter the copy runs ~50x faster than any shader, and a
            // linear axis would flatten every bar.
            let (mut y_min, mut y_max) = (f64::INFINITY, 0f64);
            for r in report.results.iter().filter(|r| r.dtype == dtype) {
                for v in [r.gb_per_s(), r.copy_gb_per_s(), r.cpu_mt_gb_per_s]
                    .into_iter()
                    .flatten()
                {
                    if v.is_finite() && v > 0.0 {
                        y_min = y_min.min(v);
                        y_max = y_max.max(v);
                    }
                }
            }
            if y_max <= 0.0 {
                (y_min, y_max) = (0.1, 1.0);
            }
            let (y_min, y_max) = (y_min / 2.0, y_max * 2.0);
            let mut chart = ChartBuilder::on(panel)
                .caption(
                    format!(
                        "gguf-dequant: dequantisation to {dtype}, GB/s of (quantised in + {dtype} out), log scale; dashed: copy of the same traffic"
                    ),
                    ("sans-serif", 16),
                )
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d(0f64..formats.len() as f64, (y_min..y_max).log_scale())?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .y_desc("GB/s")
                .draw()?;
            // Format names under each group.
            chart.draw_series(formats.iter().enumerate().map(|(i, f)| {
                EmptyElement::at((i as f64 + 0.5, y_min))
                    + Text::new(
                        f.name().to_string(),
                        (-(f.name().len() as i32) * 3, 8),
                        ("sans-serif", 12).into_font(),
                    )
            }))?;
            let bar_w = 0.8 / n_bars as f64;
            for (a, adapter) in report.adapters.iter().enumerate() {
                let colour = PALETTE[a % PALETTE.len()];
                chart
                    .draw_series(formats.iter().enumerate().filter_map(|(i, &f)| {
                        let v = rows(f, Some(a))?.gb_per_s()?;
                        let x0 = i as f64 + 0.1 + a as f64 * bar_w;
                        Some(Rectangle::new(
                            [(x0, y_min), (x0 + bar_w, v)],
                            colour.filled(),
                        ))
                    }))?
                    .label(format!("{} ({})", adapter.name, adapter.backend))
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                    });
                let copy: Vec<(f64, f64)> = formats
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &f)| {
                        Some((i as f64 + 0.5, rows(f, Some(a))?.copy_gb_per_s()?))
                    })
                    .collect();
                chart
                    .draw_series(DashedLineSeries::new(copy, 6, 4, colour.stroke_width(2)))?
                    .label(format!("copy, {} ({})", adapter.name, adapter.backend))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 12, y)], colour.stroke_width(2))
                    });
            }
            let a = report.adapters.len();
            chart
                .draw_series(formats.iter().enumerate().filter_map(|(i, &f)| {
                    let v = rows(f, None)?.cpu_mt_gb_per_s?;
                    let x0 = i as f64 + 0.1 + a as f64 * bar_w;
                    Some(Rectangle::new(
                        [(x0, y_min), (x0 + bar_w, v)],
                        CPU_COLOUR.filled(),
                    ))
                }))?
                .label(format!("CPU codecs, {} threads", report.cpu_threads))
                .legend(|(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], CPU_COLOUR.filled())
                });
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 12))
                .draw()?;
        }
        root.present()?;
        Ok(())
    }
}

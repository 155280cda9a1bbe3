//! The GPU half of [`crate::bench`]: adapters opened for timing, the measurement loop and the
//! plain-data report it returns.

use std::collections::BTreeMap;
use std::time::Instant;

use super::kernels::{KernelConfig, KernelResult, KernelRun};
use super::rotation::{self, plan_rotation, Rotation, HOST_CAP};
use super::values_for_mib;
use crate::formats::sample::normal_blocks;
use crate::gpu::roofline::{self, ShaderCopy, StreamJob};
use crate::gpu::timing::{GpuTimer, Timing};
use crate::gpu::{buffers, compute_adapters, DequantJob, EngineOptions, GpuEngine};
use crate::{cpu, Backend, DType, Format, GgufFile, Result};

/// Default number of timed runs per measurement.
pub const DEFAULT_RUNS: usize = 7;
/// The fewest timed runs a measurement takes.
pub const MIN_RUNS: usize = 5;

/// What to benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    /// Formats; those without a shader get CPU figures only.
    pub formats: Vec<Format>,
    /// Output dtypes of the dequantisation rows; empty: none (kernel rows only).
    pub dtypes: Vec<DType>,
    /// Values per format (rounded up to whole blocks of 256 values by [`BenchConfig::new`]).
    pub n_values: u64,
    /// Timed runs per measurement (at least [`MIN_RUNS`]); the median is reported.
    pub runs: usize,
    /// Untimed runs before them.
    pub warmup: usize,
    /// Measure the CPU codecs too.
    pub cpu: bool,
    /// Traffic one timed run rotates through on every adapter; `None`: by device type
    /// ([`rotation::target_for`]).
    pub rotation_target: Option<u64>,
    /// The inference kernels to time ([`super::kernels`]); none by default.
    pub kernels: KernelConfig,
    /// Blocks to decode per format, e.g. a model's own ([`model_blocks`]), repeated to
    /// [`n_values`](Self::n_values); formats not here decode random blocks with finite normal
    /// scales. The kernel rows always use random blocks.
    pub blocks: BTreeMap<Format, Vec<u8>>,
}

/// The first `mib` MiB of f32 output worth of each format's blocks in `file`, taken from its
/// tensors of that format in file order (every shard of a split set): what [`BenchConfig::blocks`]
/// decodes when the benchmark runs on a model.
pub fn model_blocks(file: &GgufFile, mib: f64) -> BTreeMap<Format, Vec<u8>> {
    let n_values = values_for_mib(mib);
    let mut out: BTreeMap<Format, Vec<u8>> = BTreeMap::new();
    for t in file.tensors() {
        let want = (n_values / t.format.block_elems() as u64) as usize * t.format.block_bytes();
        let have = out.entry(t.format).or_default();
        let data = file.tensor_data(t);
        let take = want.saturating_sub(have.len()).min(data.len());
        have.extend_from_slice(&data[..take]);
        file.release_tensor(t, 0, take as u64);
    }
    out
}

impl BenchConfig {
    /// `n_blocks` blocks of `format` to decode: [`BenchConfig::blocks`] repeated, or random ones.
    fn source(&self, format: Format, n_blocks: usize) -> Vec<u8> {
        let bytes = n_blocks * format.block_bytes();
        match self.blocks.get(&format) {
            Some(b) if !b.is_empty() => b.iter().copied().cycle().take(bytes).collect(),
            _ => normal_blocks(format, n_blocks, 1),
        }
    }
}

impl BenchConfig {
    /// `formats` × `dtypes` with `mib` MiB of f32 output per format (`mib × 2¹⁸` values, rounded
    /// up to a multiple of 256 so that every format decodes the same count), [`DEFAULT_RUNS`]
    /// runs after one warm-up, CPU figures included, the rotation target by device type.
    pub fn new(formats: Vec<Format>, dtypes: Vec<DType>, mib: f64) -> BenchConfig {
        BenchConfig {
            formats,
            dtypes,
            n_values: values_for_mib(mib),
            runs: DEFAULT_RUNS,
            warmup: 1,
            cpu: true,
            rotation_target: None,
            kernels: KernelConfig::default(),
            blocks: BTreeMap::new(),
        }
    }
}

/// An adapter opened for benchmarking: an engine on its own device (with timestamp queries when
/// the adapter has them), a timer and the shader-copy roofline.
#[derive(Debug)]
pub struct BenchAdapter {
    /// The engine.
    pub engine: GpuEngine,
    /// Its timer.
    pub timer: GpuTimer,
    /// The streaming kernel, compiled and checked on this adapter.
    pub shader_copy: ShaderCopy,
}

impl BenchAdapter {
    /// Opens every compute adapter of `backend` (`all`), or the best one; `wall` times with the
    /// wall clock even where the adapter has timestamp queries. The shader copy is compiled and
    /// its output checked word for word on each ([`ShaderCopy::check`]).
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
                let shader_copy = ShaderCopy::new(&engine)?;
                shader_copy.check(&engine)?;
                Ok(BenchAdapter {
                    engine,
                    timer,
                    shader_copy,
                })
            })
            .collect()
    }

    /// The traffic target of one timed run here: `config`'s, else by device type.
    pub fn rotation_target(&self, config: &BenchConfig) -> u64 {
        config
            .rotation_target
            .unwrap_or_else(|| rotation::target_for(self.engine.adapter_info().device_type))
    }

    /// The adapter as it appears in the report of a run of `config`.
    pub fn report(&self, config: &BenchConfig) -> AdapterReport {
        let info = self.engine.adapter_info();
        AdapterReport {
            name: info.name.clone(),
            backend: info.backend.to_string().to_lowercase(),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info)
                .trim()
                .to_string(),
            timing: self.timer.timing(),
            rotation_target: self.rotation_target(config),
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
    /// Traffic each timed run aimed to rotate through ([`Rotation::target_bytes`]).
    pub rotation_target: u64,
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
    /// Median seconds of one dequantisation (a timed run's time ÷ [`Rotation::pairs`]).
    pub seconds: f64,
    /// Bytes the copy read (and wrote): `(bytes_in + bytes_out) / 2`, rounded up to 4.
    pub copy_bytes: u64,
    /// Median seconds of one copy.
    pub copy_seconds: f64,
    /// Bytes the shader copy read plus wrote: `bytes_in` and `bytes_out` of each window rounded
    /// up to 16.
    pub shader_copy_bytes: u64,
    /// Median seconds of one shader copy.
    pub shader_copy_seconds: f64,
    /// What each timed run (of all three) rotated through.
    pub rotation: Rotation,
    /// How all three were measured.
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

    /// `shader_copy_bytes / shader_copy_seconds` in GB/s.
    pub fn shader_copy_gb_per_s(&self) -> Option<f64> {
        self.gpu
            .map(|g| gbps(g.shader_copy_bytes, g.shader_copy_seconds))
    }

    /// [`BenchResult::gb_per_s`] ÷ [`BenchResult::shader_copy_gb_per_s`].
    pub fn ratio_to_shader_copy(&self) -> Option<f64> {
        Some(self.gb_per_s()? / self.shader_copy_gb_per_s()?)
    }
}

pub(super) fn gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds.max(1e-12) / 1e9
}

/// A whole benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// The adapters, indexed by [`BenchResult::adapter`].
    pub adapters: Vec<AdapterReport>,
    /// Rows: adapter-major, then format, then dtype; CPU-only formats last.
    pub results: Vec<BenchResult>,
    /// Kernel rows: adapter-major, then format, shape, kernel and batch.
    pub kernels: Vec<KernelResult>,
    /// Timed runs per measurement.
    pub runs: usize,
    /// Untimed runs before them.
    pub warmup: usize,
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
    config.kernels.validate(&config.formats)?;
    let runs = config.runs.max(MIN_RUNS);
    let n_values = config.n_values.div_ceil(256).max(1) * 256;
    let shader: Vec<Format> = config
        .formats
        .iter()
        .copied()
        .filter(|&f| f.has_shader())
        .collect();
    let pairs = (config.formats.len() * config.dtypes.len()) as u64;
    let kernel_steps = config.kernels.steps() * config.kernels.shapes.len() as u64;
    let total = (adapters.len() * shader.len()) as u64
        * (config.dtypes.len() as u64 + kernel_steps)
        + pairs * config.cpu as u64;
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
        let src = config.source(format, n_values as usize / format.block_elems());
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
    let mut kernels = Vec::new();
    for (index, adapter) in adapters.iter().enumerate() {
        let info = adapter.engine.adapter_info();
        let label = format!(
            "{} ({})",
            info.name,
            info.backend.to_string().to_lowercase()
        );
        for &format in &shader {
            let n_blocks = n_values / format.block_elems() as u64;
            let src = config.source(format, n_blocks as usize);
            for &dtype in &config.dtypes {
                step(format!("{format} {dtype} on {label}"));
                let target = adapter.rotation_target(config);
                let gpu = time_gpu(adapter, format, dtype, &src, target, config.warmup, runs)?;
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
        if !config.kernels.ops.is_empty() {
            let run = KernelRun {
                adapter,
                index,
                config: &config.kernels,
                target: adapter.rotation_target(config),
                warmup: config.warmup,
                runs,
            };
            for &format in &shader {
                for &shape in &config.kernels.shapes {
                    kernels.extend(run.measure(format, shape, &mut step)?);
                }
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
        adapters: adapters.iter().map(|a| a.report(config)).collect(),
        results,
        kernels,
        runs,
        warmup: config.warmup,
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

/// One dequantisation, GPU-resident over [`GpuCase::pairs`] distinct source/output buffer pairs
/// (the raw blocks uploaded once into each source, the outputs allocated once): each
/// [`GpuCase::run`] is one timed command buffer that decodes the whole tensor once per pair, and
/// [`GpuCase::run_shader_copy`] the same for the shader-copy roofline on the same buffers.
pub struct GpuCase<'a> {
    adapter: &'a BenchAdapter,
    format: Format,
    dtype: DType,
    n_blocks: u64,
    pairs: Vec<(wgpu::Buffer, wgpu::Buffer)>,
}

impl<'a> GpuCase<'a> {
    /// Uploads `blocks` (whole blocks of `format`) to `adapter` once and compiles the pipeline.
    pub fn new(
        adapter: &'a BenchAdapter,
        format: Format,
        dtype: DType,
        blocks: &[u8],
    ) -> Result<GpuCase<'a>> {
        GpuCase::rotating(adapter, format, dtype, blocks, 1)
    }

    /// [`GpuCase::new`] over `pairs` (at least 1) distinct buffer pairs, each holding `blocks`.
    pub fn rotating(
        adapter: &'a BenchAdapter,
        format: Format,
        dtype: DType,
        blocks: &[u8],
        pairs: u64,
    ) -> Result<GpuCase<'a>> {
        let engine = &adapter.engine;
        engine.prepare(format, dtype)?;
        let n_blocks = cpu::n_values(format, blocks.len())? as u64 / format.block_elems() as u64;
        let (src_len, dst_len) = roofline::buffer_sizes(format, dtype, n_blocks);
        let storage = wgpu::BufferUsages::STORAGE;
        let device = engine.device();
        let pairs = (0..pairs.max(1))
            .map(|_| {
                Ok((
                    buffers::upload_sized(device, "bench source", blocks, src_len, storage)?,
                    buffers::upload_sized(device, "bench output", &[], dst_len, storage)?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(GpuCase {
            adapter,
            format,
            dtype,
            n_blocks,
            pairs,
        })
    }

    /// Distinct buffer pairs one run goes through.
    pub fn pairs(&self) -> u64 {
        self.pairs.len() as u64
    }

    /// Quantised bytes read plus output bytes written by one dequantisation.
    pub fn traffic(&self) -> u64 {
        self.n_blocks
            * (self.format.block_bytes() + self.format.block_elems() * self.dtype.size()) as u64
    }

    /// One timed run (one dequantisation per pair): seconds per dequantisation, and how they
    /// were measured.
    pub fn run(&self) -> Result<(f64, Timing)> {
        let engine = &self.adapter.engine;
        let (seconds, timing) = self.adapter.timer.time(engine, |encoder| {
            for (src, dst) in &self.pairs {
                let job = DequantJob {
                    format: self.format,
                    dtype: self.dtype,
                    src,
                    src_offset: 0,
                    n_blocks: self.n_blocks,
                    dst,
                    dst_offset: 0,
                };
                engine.record(encoder, &job)?;
            }
            Ok(())
        })?;
        Ok((seconds / self.pairs() as f64, timing))
    }

    /// One timed run of the shader-copy roofline with this case's traffic shape, one per pair:
    /// seconds per copy, and how they were measured.
    pub fn run_shader_copy(&self) -> Result<(f64, Timing)> {
        let engine = &self.adapter.engine;
        let (seconds, timing) = self.adapter.timer.time(engine, |encoder| {
            for (src, dst) in &self.pairs {
                self.adapter
                    .shader_copy
                    .record(engine, encoder, &self.stream_job(src, dst))?;
            }
            Ok(())
        })?;
        Ok((seconds / self.pairs() as f64, timing))
    }

    /// Bytes one shader copy reads plus writes: [`GpuCase::traffic`] with each window's input
    /// and output rounded up to 16 bytes.
    pub fn shader_copy_traffic(&self) -> Result<u64> {
        let engine = &self.adapter.engine;
        let windows = roofline::stream_windows(
            self.format,
            self.dtype,
            self.n_blocks,
            engine.max_binding_size(),
            engine.offset_alignment(),
        )?;
        Ok(windows.iter().map(roofline::StreamWindow::traffic).sum())
    }

    fn stream_job<'b>(&self, src: &'b wgpu::Buffer, dst: &'b wgpu::Buffer) -> StreamJob<'b> {
        StreamJob {
            format: self.format,
            dtype: self.dtype,
            n_blocks: self.n_blocks,
            src,
            dst,
        }
    }
}

/// `copy_buffer_to_buffer` of `bytes` bytes over distinct buffer pairs of one adapter (one, or
/// as many as [`CopyCase::rotating`] is given): each [`CopyCase::run`] copies once per pair.
pub struct CopyCase<'a> {
    adapter: &'a BenchAdapter,
    bytes: u64,
    pairs: Vec<(wgpu::Buffer, wgpu::Buffer)>,
}

impl<'a> CopyCase<'a> {
    /// Buffers for a copy of `bytes` (rounded up to 4) bytes; the source starts with `fill`, then
    /// zeros.
    pub fn new(adapter: &'a BenchAdapter, bytes: u64, fill: &[u8]) -> Result<CopyCase<'a>> {
        CopyCase::rotating(adapter, bytes, fill, 1)
    }

    /// [`CopyCase::new`] over `pairs` (at least 1) distinct buffer pairs.
    pub fn rotating(
        adapter: &'a BenchAdapter,
        bytes: u64,
        fill: &[u8],
        pairs: u64,
    ) -> Result<CopyCase<'a>> {
        let bytes = copy_bytes(bytes);
        let device = adapter.engine.device();
        let fill = &fill[..fill.len().min(bytes as usize)];
        let pairs = (0..pairs.max(1))
            .map(|_| {
                Ok((
                    buffers::upload_sized(
                        device,
                        "bench copy source",
                        fill,
                        bytes,
                        wgpu::BufferUsages::COPY_SRC,
                    )?,
                    buffers::upload_sized(
                        device,
                        "bench copy destination",
                        &[],
                        bytes,
                        wgpu::BufferUsages::COPY_DST,
                    )?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(CopyCase {
            adapter,
            bytes,
            pairs,
        })
    }

    /// Bytes copied (read, and again written).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// One timed run (one copy per pair): seconds per copy.
    pub fn run(&self) -> Result<(f64, Timing)> {
        let (seconds, timing) = self.adapter.timer.time(&self.adapter.engine, |encoder| {
            for (src, dst) in &self.pairs {
                roofline::record_copy(encoder, src, dst, self.bytes);
            }
            Ok(())
        })?;
        Ok((seconds / self.pairs.len() as f64, timing))
    }
}

/// `bytes` rounded up to a multiple of 4 (at least 4): what a copy of `bytes` moves.
fn copy_bytes(bytes: u64) -> u64 {
    bytes.max(4).div_ceil(4) * 4
}

/// Median seconds of `runs` runs of `f` after `warmup` untimed ones, and how they were timed.
pub(super) fn median_of(
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

/// GPU time of `format` → `dtype` on `adapter`, of the shader copy with its traffic shape and of
/// the buffer copy of the same traffic, each timed run rotating through enough buffer pairs to
/// move `target` bytes.
pub(super) fn time_gpu(
    adapter: &BenchAdapter,
    format: Format,
    dtype: DType,
    src: &[u8],
    target: u64,
    warmup: usize,
    runs: usize,
) -> Result<GpuFigures> {
    let n_blocks = cpu::n_values(format, src.len())? as u64 / format.block_elems() as u64;
    let traffic = src.len() as u64 + n_blocks * (format.block_elems() * dtype.size()) as u64;
    let copy_bytes = copy_bytes(traffic.div_ceil(2));
    let (src_len, dst_len) = roofline::buffer_sizes(format, dtype, n_blocks);
    let pair_bytes = (src_len + dst_len).max(2 * copy_bytes);
    let rotation = plan_rotation(traffic, pair_bytes, target, HOST_CAP);
    let (seconds, shader_copy_seconds, shader_copy_bytes, timing) = {
        let case = GpuCase::rotating(adapter, format, dtype, src, rotation.pairs)?;
        let (seconds, timing) = median_of(warmup, runs, || case.run())?;
        let (shader, _) = median_of(warmup, runs, || case.run_shader_copy())?;
        (seconds, shader, case.shader_copy_traffic()?, timing)
    };
    let copy = CopyCase::rotating(adapter, copy_bytes, src, rotation.pairs)?;
    let (copy_seconds, _) = median_of(warmup, runs, || copy.run())?;
    Ok(GpuFigures {
        seconds,
        copy_bytes,
        copy_seconds,
        shader_copy_bytes,
        shader_copy_seconds,
        rotation,
        timing,
    })
}

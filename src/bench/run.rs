//! The benchmark's run loop and its plain-data report: the dequantisation rows (GPU and CPU per
//! adapter × format × dtype) and, through [`super::kernels`], the kernel rows.

use std::collections::BTreeMap;
use std::time::Instant;

use super::budget::DEFAULT_BUDGET;
use super::kernels::{KernelConfig, KernelResult, KernelRun};
use super::rotation;
use super::timing::{gbps, median, time_gpu, BenchAdapter, GpuFigures, Runs};
use super::values_for_mib;
use crate::formats::sample::normal_blocks;
use crate::gpu::kernels::Mapping;
use crate::gpu::timing::Timing;
use crate::{cpu, DType, Format, GgufFile, Result};

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
    /// Seconds each GPU measurement may take ([`super::budget`]): past it the rotation, then
    /// the runs shrink; `None`: no budget.
    pub budget: Option<f64>,
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
    /// runs after one warm-up, CPU figures included, the rotation target by device type, the
    /// time budget [`DEFAULT_BUDGET`] seconds per measurement.
    pub fn new(formats: Vec<Format>, dtypes: Vec<DType>, mib: f64) -> BenchConfig {
        BenchConfig {
            formats,
            dtypes,
            n_values: values_for_mib(mib),
            runs: DEFAULT_RUNS,
            warmup: 1,
            cpu: true,
            rotation_target: None,
            budget: Some(DEFAULT_BUDGET),
            kernels: KernelConfig::default(),
            blocks: BTreeMap::new(),
        }
    }
}

impl BenchAdapter {
    /// How `config` measures on this adapter, `runs` timed runs per measurement.
    fn runs(&self, config: &BenchConfig, runs: usize) -> Runs {
        Runs {
            warmup: config.warmup,
            runs,
            target: self.rotation_target(config),
            budget: config.budget,
        }
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
            precision: self.engine.precision(),
            unroll: self.engine.matvec_policy().unrolled(),
            rows: match self.engine.matvec_policy().mapping {
                Mapping::Rows(shape) => Some(shape.to_string()),
                Mapping::Classic => None,
            },
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
    /// Traffic each timed run aimed to rotate through ([`super::rotation::Rotation::target_bytes`]).
    pub rotation_target: u64,
    /// The precision its matvec rows were asked to sum in ([`crate::gpu::EngineOptions::precision`];
    /// formats without a kernel of that mode sum `exact`).
    pub precision: crate::gpu::kernels::Precision,
    /// Whether its matvec rows were unrolled ([`crate::gpu::kernels::MatVecPolicy::unrolled`]).
    pub unroll: bool,
    /// The shape of its default matvec rows mapping, `WxR`
    /// ([`crate::gpu::kernels::MatVecPolicy::mapping`]); `None`: the classic mapping.
    pub rows: Option<String>,
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

/// A whole benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// The adapters, indexed by [`BenchResult::adapter`].
    pub adapters: Vec<AdapterReport>,
    /// Rows: adapter-major, then format, then dtype; CPU-only formats last.
    pub results: Vec<BenchResult>,
    /// Kernel rows: adapter-major, then format, shape, kernel and batch.
    pub kernels: Vec<KernelResult>,
    /// Timed runs per measurement, as asked (a row's own count can be lower where the time
    /// budget ran out).
    pub runs: usize,
    /// Untimed runs before them.
    pub warmup: usize,
    /// Seconds each GPU measurement could take ([`BenchConfig::budget`]).
    pub budget: Option<f64>,
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
                let gpu = time_gpu(adapter, format, dtype, &src, &adapter.runs(config, runs))?;
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
                how: adapter.runs(config, runs),
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
        budget: config.budget,
        cpu_threads: rayon::current_num_threads(),
    })
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

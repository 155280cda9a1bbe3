//! The kernel rows of [`crate::bench`]: the inference kernels of [`crate::gpu::kernels`] on
//! weights of real models' shapes, each next to the rooflines of the same adapter and to the
//! dequantiser on the same tensor.
//!
//! For every adapter × format with a shader × [`WeightShape`] (`[K, N]`: N rows of K values,
//! deterministic random blocks as for the dequantisation rows):
//!
//! * **Reference.** The dequantisation of the whole tensor to f32, timed exactly like a
//!   dequantisation row (its own rotation, with the buffer-copy and shader-copy rooflines of its
//!   traffic, `K·N` values in and `4·K·N` bytes out): [`KernelResult::dequant`].
//! * **Rotation.** The kernels read `pairs` distinct copies of the weight per timed run, the
//!   fewest whose bytes reach the adapter's target ([`super::rotation::plan_rotation`] with the
//!   weight's bytes as the traffic: ≥ 1 GiB of weights on a discrete GPU, 256 MiB elsewhere),
//!   and report the time per call. X is one buffer (every call reads it, as a model's
//!   activations); the outputs are distinct per call up to [`OUTPUT_POOL`] bytes, then reused
//!   cyclically.
//! * **matvec** (`batch` 1..=8 columns): `gb_per_s` = weight bytes / time, `gflops` = `2·K·N·batch`
//!   / time; `ratio_to_copy` and `ratio_to_shader_copy` divide `gb_per_s` by the reference's
//!   rooflines (bandwidths of read + written bytes, so 1.0 means the kernel reads its weight as
//!   fast as the adapter moves bytes), `ratio_to_dequant` by the reference's own GB/s (in + out).
//!   **Unfused** ([`Unfused`], every format but F16, whose matvec is already the f16 one): the
//!   dequantisation of the same weight to f16 into a buffer, then the f16 matvec on that buffer
//!   with our own kernel, each timed on its own over a rotation of f16 copies (planned on the f16
//!   bytes); `fused_speedup` = (dequant + f16 matvec) / fused time.
//! * **matmul** (`batch` columns, by default [`DEFAULT_MATMUL_BATCH`] on GPUs and
//!   [`CPU_MATMUL_BATCH`] on CPU adapters): `gflops`; `gb_per_s` is the weight's bytes / time,
//!   and no ratios (the product is bound by arithmetic, not bandwidth). Its rotation counts the
//!   bytes the kernel loads and stores ([`matmul_traffic`]: the weight once per column pass, X
//!   once per row pass, Y once; passes of [`crate::gpu::GpuEngine::matmul_tile`]) against the same target, so a timed run of 512-column
//!   products is one call per weight copy, or a few (on a CPU adapter one 32-column product of a
//!   4096 × 4096 weight takes about 0.3 s; 29 of them per run, as the weight's bytes alone would
//!   ask for, would take minutes per row).
//! * **get_rows** (`batch` random rows, f32 output, distinct ids per call): `gb_per_s` = (rows'
//!   blocks read + f32 written) / time, the dequantiser's own traffic definition, and the three
//!   ratios.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::measure::{gbps, median_of, time_gpu, BenchAdapter, GpuFigures};
use super::rotation::{plan_rotation, Rotation, HOST_CAP};
use crate::formats::sample::{normal_blocks, Rng};
use crate::gpu::kernels::{GetRowsJob, MulMatJob, Operand, MATVEC_MAX_BATCH};
use crate::gpu::loader::ResidentTensor;
use crate::gpu::timing::Timing;
use crate::gpu::{buffers, roofline, DequantJob, GpuError};
use crate::{DType, Format, Result};

/// Columns of the matmul rows on a GPU (a prompt of 512 tokens).
pub const DEFAULT_MATMUL_BATCH: u32 = 512;
/// Columns of the matmul rows on a CPU adapter (lavapipe, llvmpipe GL, SwiftShader), where 512
/// columns of a 4096 × 4096 weight take seconds per call.
pub const CPU_MATMUL_BATCH: u32 = 32;
/// Rows one get_rows call gathers by default (a prompt of 512 tokens).
pub const DEFAULT_GET_ROWS: u32 = 512;
/// The most bytes of distinct output buffers one kernel measurement keeps alive; past it the
/// outputs are reused cyclically.
pub const OUTPUT_POOL: u64 = 256 << 20;

/// A kernel `bench` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelOp {
    /// `y = W x` for 1 to 8 columns ([`crate::gpu::GpuEngine::record_matvec`]).
    MatVec,
    /// The tiled `Y = W X` ([`crate::gpu::GpuEngine::record_matmul`]).
    MatMul,
    /// Row gather to f32 ([`crate::gpu::GpuEngine::record_get_rows`]).
    GetRows,
}

impl KernelOp {
    /// Every kernel, in the report's order.
    pub const ALL: [KernelOp; 3] = [KernelOp::MatVec, KernelOp::MatMul, KernelOp::GetRows];

    /// `matvec`, `matmul`, `get_rows`.
    pub const fn name(self) -> &'static str {
        match self {
            KernelOp::MatVec => "matvec",
            KernelOp::MatMul => "matmul",
            KernelOp::GetRows => "get_rows",
        }
    }

    /// The kernel of a [`KernelOp::name`] (ASCII case ignored; `get-rows` too).
    pub fn from_name(name: &str) -> Option<KernelOp> {
        let name = name.trim().to_ascii_lowercase().replace('-', "_");
        KernelOp::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for KernelOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A weight's shape in ggml order: `N` rows of `K` values (dims `[K, N]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WeightShape {
    /// Values per row (the product's inner dimension).
    pub k: u64,
    /// Rows (outputs of a matvec).
    pub n: u64,
}

impl WeightShape {
    /// `[k, n]`.
    pub const fn new(k: u64, n: u64) -> WeightShape {
        WeightShape { k, n }
    }

    /// `K · N`.
    pub const fn values(self) -> u64 {
        self.k * self.n
    }
}

/// The default shapes: Llama-class attention (4096 × 4096) and FFN (4096 × 14336) weights, and a
/// 151 936-row embedding of 1024 values (Qwen3-0.6B's vocabulary; the tied output projection of
/// small models is the same matrix).
pub const DEFAULT_SHAPES: [WeightShape; 3] = [
    WeightShape::new(4096, 4096),
    WeightShape::new(4096, 14336),
    WeightShape::new(1024, 151_936),
];

impl fmt::Display for WeightShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.k, self.n)
    }
}

impl FromStr for WeightShape {
    type Err = String;

    /// `KxN` (or `K×N`), both positive.
    fn from_str(s: &str) -> Result<WeightShape, String> {
        let t = s.trim().to_ascii_lowercase().replace('×', "x");
        let (k, n) = t
            .split_once('x')
            .ok_or_else(|| format!("`{s}` is not KxN (e.g. 4096x4096)"))?;
        let num = |v: &str| {
            v.trim()
                .replace('_', "")
                .parse::<u64>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("`{s}`: `{v}` is not a positive integer"))
        };
        let shape = WeightShape::new(num(k)?, num(n)?);
        shape
            .k
            .checked_mul(shape.n)
            .filter(|&v| v <= 1 << 40)
            .ok_or_else(|| format!("`{s}` is too large"))?;
        Ok(shape)
    }
}

/// Which kernels [`super::run`] times, on what.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelConfig {
    /// The kernels; empty: no kernel rows (the default).
    pub ops: Vec<KernelOp>,
    /// Weight shapes ([`DEFAULT_SHAPES`] by default).
    pub shapes: Vec<WeightShape>,
    /// Columns of the matvec rows, each 1..=8 (one row per batch); `[1]` by default.
    pub matvec_batches: Vec<u32>,
    /// Columns of the matmul rows; `None`: by device type ([`matmul_batch_for`]).
    pub matmul_batch: Option<u32>,
    /// Rows each get_rows call gathers.
    pub get_rows: u32,
}

impl Default for KernelConfig {
    fn default() -> KernelConfig {
        KernelConfig {
            ops: Vec::new(),
            shapes: DEFAULT_SHAPES.to_vec(),
            matvec_batches: vec![1],
            matmul_batch: None,
            get_rows: DEFAULT_GET_ROWS,
        }
    }
}

impl KernelConfig {
    /// Checks the configuration against `formats`: batches in range, every shape's K a whole
    /// number of each shader format's blocks.
    pub fn validate(&self, formats: &[Format]) -> Result<()> {
        let bad = |m: String| -> crate::Error { GpuError::InvalidJob(m).into() };
        if self.ops.is_empty() {
            return Ok(());
        }
        if self.shapes.is_empty() {
            return Err(bad("kernels: no weight shape".into()));
        }
        if self.ops.contains(&KernelOp::MatVec) {
            if self.matvec_batches.is_empty() {
                return Err(bad("matvec: no batch".into()));
            }
            if let Some(b) = self
                .matvec_batches
                .iter()
                .find(|&&b| b == 0 || b > MATVEC_MAX_BATCH)
            {
                return Err(bad(format!(
                    "matvec takes 1 to {MATVEC_MAX_BATCH} columns, not {b}"
                )));
            }
        }
        if self.matmul_batch == Some(0) || self.get_rows == 0 {
            return Err(bad(
                "matmul columns and get_rows rows must be positive".into()
            ));
        }
        for &f in formats.iter().filter(|f| f.has_shader()) {
            let elems = f.block_elems() as u64;
            if let Some(s) = self.shapes.iter().find(|s| !s.k.is_multiple_of(elems)) {
                return Err(bad(format!(
                    "shape {s}: K = {} is not a multiple of the {elems}-value {f} block",
                    s.k
                )));
            }
        }
        Ok(())
    }

    /// Progress steps of one adapter × format × shape.
    pub(super) fn steps(&self) -> u64 {
        if self.ops.is_empty() {
            return 0;
        }
        1 + self
            .ops
            .iter()
            .map(|op| match op {
                KernelOp::MatVec => self.matvec_batches.len() as u64,
                _ => 1,
            })
            .sum::<u64>()
    }
}

/// Columns of the matmul rows on an adapter of `device_type` when none is asked for:
/// [`CPU_MATMUL_BATCH`] on CPU adapters, else [`DEFAULT_MATMUL_BATCH`].
pub fn matmul_batch_for(device_type: wgpu::DeviceType) -> u32 {
    match device_type {
        wgpu::DeviceType::Cpu => CPU_MATMUL_BATCH,
        _ => DEFAULT_MATMUL_BATCH,
    }
}

/// The unfused alternative to a fused matvec: dequantise to f16, then the f16 matvec.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unfused {
    /// Median seconds of the dequantisation of the weight to f16.
    pub dequant_seconds: f64,
    /// Median seconds of the f16 matvec on the dequantised weight, with the same batch.
    pub matvec_seconds: f64,
    /// The f16 copies each timed run (of both) went through.
    pub rotation: Rotation,
}

impl Unfused {
    /// Both passes.
    pub fn seconds(&self) -> f64 {
        self.dequant_seconds + self.matvec_seconds
    }
}

/// One (adapter, format, shape, kernel, batch) row.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelResult {
    /// Index into [`super::BenchReport::adapters`].
    pub adapter: usize,
    /// The weight's format.
    pub format: Format,
    /// The kernel.
    pub op: KernelOp,
    /// The weight's shape.
    pub shape: WeightShape,
    /// matvec, matmul: columns of X; get_rows: rows gathered per call.
    pub batch: u32,
    /// Bytes of the whole weight.
    pub weight_bytes: u64,
    /// Bytes [`KernelResult::gb_per_s`] counts per call: the weight (matvec, matmul), or the
    /// gathered rows' blocks plus their f32 output (get_rows).
    pub bytes: u64,
    /// Floating-point operations per call (`2·K·N·batch`); `None` for get_rows.
    pub flops: Option<u64>,
    /// Median seconds of one call.
    pub seconds: f64,
    /// The weight copies each timed run went through.
    pub rotation: Rotation,
    /// How it was timed.
    pub timing: Timing,
    /// Bytes the reference dequantisation moved: the weight plus `4·K·N`.
    pub dequant_bytes: u64,
    /// The dequantisation of the same tensor to f32, with the rooflines of its traffic.
    pub dequant: GpuFigures,
    /// matvec of every format but F16: dequantise to f16, then the f16 matvec.
    pub unfused: Option<Unfused>,
}

impl KernelResult {
    /// `bytes / seconds`, GB/s.
    pub fn gb_per_s(&self) -> f64 {
        gbps(self.bytes, self.seconds)
    }

    /// `flops / seconds`, GFLOPS.
    pub fn gflops(&self) -> Option<f64> {
        self.flops.map(|f| f as f64 / self.seconds.max(1e-12) / 1e9)
    }

    /// The reference dequantisation's `(bytes in + bytes out) / seconds`, GB/s.
    pub fn dequant_gb_per_s(&self) -> f64 {
        gbps(self.dequant_bytes, self.dequant.seconds)
    }

    /// The buffer-copy roofline measured with the reference, GB/s.
    pub fn copy_gb_per_s(&self) -> f64 {
        gbps(2 * self.dequant.copy_bytes, self.dequant.copy_seconds)
    }

    /// The shader-copy roofline measured with the reference, GB/s.
    pub fn shader_copy_gb_per_s(&self) -> f64 {
        gbps(
            self.dequant.shader_copy_bytes,
            self.dequant.shader_copy_seconds,
        )
    }

    fn bandwidth_bound(&self) -> bool {
        self.op != KernelOp::MatMul
    }

    /// `gb_per_s / copy_gb_per_s`; `None` for matmul.
    pub fn ratio_to_copy(&self) -> Option<f64> {
        self.bandwidth_bound()
            .then(|| self.gb_per_s() / self.copy_gb_per_s())
    }

    /// `gb_per_s / shader_copy_gb_per_s`; `None` for matmul.
    pub fn ratio_to_shader_copy(&self) -> Option<f64> {
        self.bandwidth_bound()
            .then(|| self.gb_per_s() / self.shader_copy_gb_per_s())
    }

    /// `gb_per_s / dequant_gb_per_s`; `None` for matmul.
    pub fn ratio_to_dequant(&self) -> Option<f64> {
        self.bandwidth_bound()
            .then(|| self.gb_per_s() / self.dequant_gb_per_s())
    }

    /// Unfused seconds ÷ fused seconds: how much faster the fused matvec is.
    pub fn fused_speedup(&self) -> Option<f64> {
        self.unfused.map(|u| u.seconds() / self.seconds.max(1e-12))
    }
}

/// What one adapter × format × shape measures with, and how.
pub(super) struct KernelRun<'a> {
    pub adapter: &'a BenchAdapter,
    pub index: usize,
    pub config: &'a KernelConfig,
    pub target: u64,
    pub warmup: usize,
    pub runs: usize,
}

/// Bytes one matmul of `batch` columns on a weight of `shape` (`weight_bytes`) loads and stores,
/// for a kernel covering `tile = (rows, columns)` per pass ([`crate::gpu::GpuEngine::matmul_tile`]):
/// the weight once per column pass, X once per row pass, Y once.
pub fn matmul_traffic(shape: WeightShape, weight_bytes: u64, batch: u32, tile: (u32, u32)) -> u64 {
    let batch = batch as u64;
    weight_bytes * batch.div_ceil(tile.1 as u64)
        + 4 * shape.k * batch * shape.n.div_ceil(tile.0 as u64)
        + 4 * shape.n * batch
}

/// `y = weight · x` over whole buffers, `batch` columns.
fn whole_job<'a>(
    weight: &'a ResidentTensor,
    x: &'a wgpu::Buffer,
    y: &'a wgpu::Buffer,
    batch: u32,
) -> MulMatJob<'a> {
    MulMatJob {
        weight,
        x: Operand::whole(x),
        y: Operand::whole(y),
        batch,
    }
}

/// Up to `want` buffers of `bytes` each (at least one), at most [`OUTPUT_POOL`] bytes together.
fn output_pool(adapter: &BenchAdapter, bytes: u64, want: u64) -> Result<Vec<wgpu::Buffer>> {
    let bytes = bytes.next_multiple_of(16).max(16);
    let count = want.min(OUTPUT_POOL / bytes).max(1);
    (0..count)
        .map(|_| {
            Ok(buffers::upload_sized(
                adapter.engine.device(),
                "bench kernel output",
                &[],
                bytes,
                wgpu::BufferUsages::STORAGE,
            )?)
        })
        .collect()
}

/// `values` f32 in [-1, 1) from `seed`, as a storage buffer.
fn random_f32(adapter: &BenchAdapter, values: u64, seed: u64) -> Result<wgpu::Buffer> {
    let mut rng = Rng::new(seed);
    let v: Vec<f32> = (0..values)
        .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect();
    Ok(buffers::upload(
        adapter.engine.device(),
        "bench kernel x",
        bytemuck::cast_slice(&v),
    )?)
}

impl KernelRun<'_> {
    fn time_calls(
        &self,
        calls: usize,
        mut record: impl FnMut(&mut wgpu::CommandEncoder, usize) -> Result<()>,
    ) -> Result<(f64, Timing)> {
        let engine = &self.adapter.engine;
        median_of(self.warmup, self.runs, || {
            let (s, t) = self.adapter.timer.time(engine, |encoder| {
                for i in 0..calls {
                    record(encoder, i)?;
                }
                Ok(())
            })?;
            Ok((s / calls.max(1) as f64, t))
        })
    }

    /// Every row of `format` on `shape`, calling `step` before each measurement.
    pub fn measure(
        &self,
        format: Format,
        shape: WeightShape,
        step: &mut dyn FnMut(String),
    ) -> Result<Vec<KernelResult>> {
        let engine = &self.adapter.engine;
        let info = engine.adapter_info();
        let on = format!(
            "{} ({})",
            info.name,
            info.backend.to_string().to_lowercase()
        );
        let what = |s: &str| format!("{format} {shape} {s} on {on}");
        let n_blocks = shape.values() / format.block_elems() as u64;
        let blocks = normal_blocks(format, n_blocks as usize, 1);
        let weight_bytes = blocks.len() as u64;
        let dims = [shape.k, shape.n];

        step(what("dequantised to f32 (reference)"));
        let dequant = time_gpu(
            self.adapter,
            format,
            DType::F32,
            &blocks,
            self.target,
            self.warmup,
            self.runs,
        )?;
        let dequant_bytes = weight_bytes + 4 * shape.values();

        let rotation = plan_rotation(weight_bytes, weight_bytes, self.target, HOST_CAP);
        let weights = (0..rotation.pairs)
            .map(|i| {
                ResidentTensor::upload(engine, &format!("bench weight {i}"), format, &dims, &blocks)
            })
            .collect::<Result<Vec<_>>>()?;
        drop(blocks);
        let matmul_batch = self
            .config
            .matmul_batch
            .unwrap_or_else(|| matmul_batch_for(info.device_type));
        let x_cols = self
            .config
            .ops
            .iter()
            .map(|op| match op {
                KernelOp::MatVec => self
                    .config
                    .matvec_batches
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(1),
                KernelOp::MatMul => matmul_batch,
                KernelOp::GetRows => 0,
            })
            .max()
            .unwrap_or(0);
        let x = random_f32(self.adapter, x_cols.max(1) as u64 * shape.k, 2)?;
        let row = |op, batch, bytes, flops, (seconds, timing), rotation, unfused| KernelResult {
            adapter: self.index,
            format,
            op,
            shape,
            batch,
            weight_bytes,
            bytes,
            flops,
            seconds,
            rotation,
            timing,
            dequant_bytes,
            dequant,
            unfused,
        };
        let calls = weights.len();
        let mut rows = Vec::new();
        for &op in &self.config.ops {
            match op {
                KernelOp::MatVec => {
                    let mut f16 = None;
                    for &batch in &self.config.matvec_batches {
                        step(what(&format!("matvec ×{batch}")));
                        let ys =
                            output_pool(self.adapter, batch as u64 * shape.n * 4, calls as u64)?;
                        let timed = self.time_calls(calls, |encoder, i| {
                            engine.record_matvec(
                                encoder,
                                &whole_job(&weights[i], &x, &ys[i % ys.len()], batch),
                            )
                        })?;
                        let unfused = if format == Format::F16 {
                            None
                        } else {
                            if f16.is_none() {
                                f16 = Some(self.dequantise_to_f16(format, shape, &weights)?);
                            }
                            let (copies, dequant_seconds, f16_rotation) =
                                f16.as_ref().expect("made above");
                            let (matvec_seconds, _) =
                                self.time_calls(copies.len(), |encoder, i| {
                                    engine.record_matvec(
                                        encoder,
                                        &whole_job(&copies[i], &x, &ys[i % ys.len()], batch),
                                    )
                                })?;
                            Some(Unfused {
                                dequant_seconds: *dequant_seconds,
                                matvec_seconds,
                                rotation: *f16_rotation,
                            })
                        };
                        let flops = 2 * shape.values() * batch as u64;
                        rows.push(row(
                            op,
                            batch,
                            weight_bytes,
                            Some(flops),
                            timed,
                            rotation,
                            unfused,
                        ));
                    }
                }
                KernelOp::MatMul => {
                    let batch = matmul_batch;
                    step(what(&format!("matmul ×{batch}")));
                    let tile = self.adapter.engine.matmul_tile();
                    let traffic = matmul_traffic(shape, weight_bytes, batch, tile);
                    let planned = plan_rotation(traffic, weight_bytes, self.target, HOST_CAP);
                    let calls = (planned.pairs as usize).min(calls);
                    let mm_rotation = Rotation {
                        pairs: calls as u64,
                        target_bytes: self.target,
                        bytes_per_run: calls as u64 * traffic,
                    };
                    let ys = output_pool(self.adapter, batch as u64 * shape.n * 4, calls as u64)?;
                    let timed = self.time_calls(calls, |encoder, i| {
                        engine.record_matmul(
                            encoder,
                            &whole_job(&weights[i], &x, &ys[i % ys.len()], batch),
                        )
                    })?;
                    let flops = 2 * shape.values() * batch as u64;
                    rows.push(row(
                        op,
                        batch,
                        weight_bytes,
                        Some(flops),
                        timed,
                        mm_rotation,
                        None,
                    ));
                }
                KernelOp::GetRows => {
                    let n_ids = self.config.get_rows;
                    step(what(&format!("get_rows ×{n_ids}")));
                    let mut rng = Rng::new(3);
                    let ids = (0..calls)
                        .map(|_| {
                            let v: Vec<u32> = (0..n_ids)
                                .map(|_| (rng.next_u64() % shape.n) as u32)
                                .collect();
                            Ok(buffers::upload(
                                engine.device(),
                                "bench get_rows ids",
                                bytemuck::cast_slice(&v),
                            )?)
                        })
                        .collect::<Result<Vec<_>>>()?;
                    let outs = output_pool(self.adapter, n_ids as u64 * shape.k * 4, calls as u64)?;
                    let timed = self.time_calls(calls, |encoder, i| {
                        engine.record_get_rows(
                            encoder,
                            &GetRowsJob {
                                weight: &weights[i],
                                ids: Operand::whole(&ids[i]),
                                n_ids,
                                out: Operand::whole(&outs[i % outs.len()]),
                                dtype: DType::F32,
                            },
                        )
                    })?;
                    let row_bytes = weight_bytes / shape.n;
                    let bytes = n_ids as u64 * (row_bytes + 4 * shape.k);
                    let gr_rotation = Rotation {
                        bytes_per_run: calls as u64 * bytes,
                        ..rotation
                    };
                    rows.push(row(op, n_ids, bytes, None, timed, gr_rotation, None));
                }
            }
        }
        Ok(rows)
    }

    /// Bytes the f16 copies may take beside `calls` weights of `weight_bytes`.
    fn f16_cap(&self, weight_bytes: u64, calls: usize) -> u64 {
        HOST_CAP.saturating_sub(weight_bytes * calls as u64)
    }

    /// f16 copies of the weight (as many as a rotation planned on their bytes), the median
    /// seconds of one dequantisation into them (copy `i` from weight `i mod weights`) and the
    /// rotation.
    fn dequantise_to_f16(
        &self,
        format: Format,
        shape: WeightShape,
        weights: &[ResidentTensor],
    ) -> Result<(Vec<ResidentTensor>, f64, Rotation)> {
        let engine = &self.adapter.engine;
        engine.prepare(format, DType::F16)?;
        let n_blocks = shape.values() / format.block_elems() as u64;
        let f16_bytes = 2 * shape.values();
        let (_, dst_len) = roofline::buffer_sizes(format, DType::F16, n_blocks);
        let weight_bytes = weights.first().map_or(0, ResidentTensor::byte_len);
        let rotation = plan_rotation(
            f16_bytes,
            dst_len,
            self.target,
            self.f16_cap(weight_bytes, weights.len()).max(dst_len),
        );
        let copies = (0..rotation.pairs)
            .map(|i| {
                let buffer = buffers::upload_sized(
                    engine.device(),
                    "bench f16 weight",
                    &[],
                    dst_len,
                    wgpu::BufferUsages::STORAGE,
                )?;
                ResidentTensor::from_buffer(
                    &format!("bench f16 weight {i}"),
                    Format::F16,
                    &[shape.k, shape.n],
                    Arc::new(buffer),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let (seconds, _) = self.time_calls(copies.len(), |encoder, i| {
            engine.record(
                encoder,
                &DequantJob {
                    format,
                    dtype: DType::F16,
                    src: &weights[i % weights.len()].parts[0].buffer,
                    src_offset: 0,
                    n_blocks,
                    dst: &copies[i].parts[0].buffer,
                    dst_offset: 0,
                },
            )
        })?;
        Ok((copies, seconds, rotation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_print_as_k_by_n() {
        let s: WeightShape = "4096x14336".parse().unwrap();
        assert_eq!(s, WeightShape::new(4096, 14336));
        assert_eq!(s.to_string(), "4096x14336");
        assert_eq!(s.values(), 4096 * 14336);
        assert_eq!(
            " 1024×151_936 ".parse::<WeightShape>().unwrap(),
            WeightShape::new(1024, 151_936)
        );
        assert_eq!(
            "256X8".parse::<WeightShape>().unwrap(),
            WeightShape::new(256, 8)
        );
        for bad in [
            "4096",
            "0x4",
            "4x0",
            "x4",
            "4x",
            "ax4",
            "-4x4",
            "4x4x4",
            "2000000x2000000",
        ] {
            assert!(bad.parse::<WeightShape>().is_err(), "{bad}");
        }
        assert_eq!(
            DEFAULT_SHAPES.map(|s| s.to_string()),
            ["4096x4096", "4096x14336", "1024x151936"]
        );
    }

    #[test]
    fn kernel_names_round_trip() {
        for k in KernelOp::ALL {
            assert_eq!(KernelOp::from_name(k.name()), Some(k));
            assert_eq!(KernelOp::from_name(&k.name().to_uppercase()), Some(k));
        }
        assert_eq!(KernelOp::from_name("get-rows"), Some(KernelOp::GetRows));
        assert_eq!(KernelOp::from_name("gemm"), None);
    }

    #[test]
    fn config_is_off_by_default_and_validated() {
        let c = KernelConfig::default();
        assert!(c.ops.is_empty());
        assert_eq!(c.steps(), 0);
        assert_eq!(c.shapes, DEFAULT_SHAPES);
        assert_eq!(c.matvec_batches, [1]);
        assert!(c.validate(&[Format::Q4_K]).is_ok());
        let on = KernelConfig {
            ops: KernelOp::ALL.to_vec(),
            matvec_batches: vec![1, 8],
            ..KernelConfig::default()
        };
        // One reference, two matvec rows, one matmul, one get_rows.
        assert_eq!(on.steps(), 5);
        // Every default shape fits every format with a shader.
        assert!(on.validate(crate::formats::WITH_SHADER).is_ok());
        let with = |f: fn(&mut KernelConfig)| {
            let mut c = on.clone();
            f(&mut c);
            c.validate(&[Format::Q4_K, Format::I32])
        };
        assert!(with(|c| c.matvec_batches = vec![9]).is_err());
        assert!(with(|c| c.matvec_batches = vec![0]).is_err());
        assert!(with(|c| c.matvec_batches.clear()).is_err());
        assert!(with(|c| c.shapes.clear()).is_err());
        assert!(with(|c| c.matmul_batch = Some(0)).is_err());
        assert!(with(|c| c.get_rows = 0).is_err());
        // K = 896 (Qwen2.5-0.5B) is not whole 256-value K-quant blocks; I32 has no shader.
        let e = with(|c| c.shapes = vec![WeightShape::new(896, 151_936)]).unwrap_err();
        assert!(e.to_string().contains("896"), "{e}");
        assert!(with(|c| c.shapes = vec![WeightShape::new(512, 3)]).is_ok());
    }

    #[test]
    fn matmul_batch_by_device_type() {
        assert_eq!(matmul_batch_for(wgpu::DeviceType::Cpu), CPU_MATMUL_BATCH);
        for t in [
            wgpu::DeviceType::DiscreteGpu,
            wgpu::DeviceType::IntegratedGpu,
            wgpu::DeviceType::VirtualGpu,
            wgpu::DeviceType::Other,
        ] {
            assert_eq!(matmul_batch_for(t), DEFAULT_MATMUL_BATCH, "{t:?}");
        }
    }

    #[test]
    fn matmul_traffic_counts_tiles() {
        let s = WeightShape::new(4096, 4096);
        let w = 9 << 20;
        // One column tile: the weight once, X once per 128 row tiles, Y once.
        assert_eq!(
            matmul_traffic(s, w, 32, (32, 32)),
            w + 4 * 4096 * 32 * 128 + 4 * 4096 * 32
        );
        // 512 columns: 16 column tiles.
        assert_eq!(
            matmul_traffic(s, w, 512, (32, 32)),
            16 * w + 4 * 4096 * 512 * 128 + 4 * 4096 * 512
        );
        assert_eq!(
            matmul_traffic(s, w, 33, (32, 32)),
            2 * w + 4 * 4096 * 33 * 129
        );
        // On a CPU adapter: 64 rows by 16 columns per pass.
        assert_eq!(
            matmul_traffic(s, w, 32, (64, 16)),
            2 * w + 4 * 4096 * 32 * 64 + 4 * 4096 * 32
        );
    }

    #[test]
    fn figures_follow_their_definitions() {
        let rotation = plan_rotation(1000, 1000, 1 << 20, HOST_CAP);
        let dequant = GpuFigures {
            seconds: 2e-3,
            copy_bytes: 500,
            copy_seconds: 1e-6,
            shader_copy_bytes: 5000,
            shader_copy_seconds: 1e-6,
            rotation,
            timing: Timing::Timestamp,
        };
        let mut r = KernelResult {
            adapter: 0,
            format: Format::Q4_0,
            op: KernelOp::MatVec,
            shape: WeightShape::new(64, 32),
            batch: 2,
            weight_bytes: 1152,
            bytes: 1152,
            flops: Some(2 * 64 * 32 * 2),
            seconds: 1e-6,
            rotation,
            timing: Timing::Timestamp,
            dequant_bytes: 1152 + 4 * 64 * 32,
            dequant,
            unfused: Some(Unfused {
                dequant_seconds: 2e-6,
                matvec_seconds: 1e-6,
                rotation,
            }),
        };
        let near = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
        assert!(near(r.gb_per_s(), 1.152));
        assert!(near(r.gflops().unwrap(), 8.192));
        assert!(near(r.copy_gb_per_s(), 1.0));
        assert!(near(r.shader_copy_gb_per_s(), 5.0));
        assert!(near(r.ratio_to_copy().unwrap(), 1.152));
        assert!(near(r.ratio_to_shader_copy().unwrap(), 1.152 / 5.0));
        assert!(near(
            r.ratio_to_dequant().unwrap(),
            1.152 / (r.dequant_bytes as f64 / 2e-3 / 1e9)
        ));
        assert!(near(r.fused_speedup().unwrap(), 3.0));
        r.op = KernelOp::MatMul;
        r.unfused = None;
        assert_eq!(
            (
                r.ratio_to_copy(),
                r.ratio_to_shader_copy(),
                r.ratio_to_dequant()
            ),
            (None, None, None)
        );
        assert_eq!(r.fused_speedup(), None);
    }
}

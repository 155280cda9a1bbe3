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
//!   and report the time per call (fewer copies, then fewer runs, where a measurement would
//!   pass the time budget: [`super::budget`]). X is one buffer (every call reads it, as a model's
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

use super::rotation::Rotation;
use super::timing::{gbps, GpuFigures};
use crate::gpu::kernels::{Op, MATVEC_MAX_BATCH};
use crate::gpu::timing::Timing;
use crate::gpu::GpuError;
use crate::{Format, Result};

mod measure;
pub(super) use measure::KernelRun;

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
/// Experts the matvec_id rows read a weight of shape `K × N` as: `[K, N / 8, 8]`.
pub const MOE_EXPERTS: u64 = 8;
/// Experts each token of the matvec_id rows uses (one token per call, ids random per call).
pub const MOE_SLOTS: u32 = 2;
/// Calls [`RecordingCost`] records per way, after one untimed warm-up.
pub const RECORDING_CALLS: usize = 64;

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
    pub ops: Vec<Op>,
    /// Weight shapes ([`DEFAULT_SHAPES`] by default).
    pub shapes: Vec<WeightShape>,
    /// Columns of the matvec rows, each 1..=8 (one row per batch); `[1]` by default.
    pub matvec_batches: Vec<u32>,
    /// Columns of the matmul rows; `None`: by device type ([`matmul_batch_for`]).
    pub matmul_batch: Option<u32>,
    /// Rows each get_rows call gathers.
    pub get_rows: u32,
    /// Every call of a timed run on one weight copy (and one f16 copy), as llama.cpp's
    /// `test-backend-ops` times its cases, instead of distinct copies: where the weight fits
    /// the GPU's caches the figures are then the caches' (`bench --one-weight`).
    pub one_weight: bool,
}

impl Default for KernelConfig {
    fn default() -> KernelConfig {
        KernelConfig {
            ops: Vec::new(),
            shapes: DEFAULT_SHAPES.to_vec(),
            matvec_batches: vec![1],
            matmul_batch: None,
            get_rows: DEFAULT_GET_ROWS,
            one_weight: false,
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
        if self.ops.contains(&Op::MatVec) {
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
        if self.ops.contains(&Op::MatVecId) {
            if let Some(s) = self
                .shapes
                .iter()
                .find(|s| !s.n.is_multiple_of(MOE_EXPERTS))
            {
                return Err(bad(format!(
                    "shape {s}: matvec_id reads N = {} rows as {MOE_EXPERTS} experts; N must be a multiple of {MOE_EXPERTS}",
                    s.n
                )));
            }
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
                Op::MatVec => self.matvec_batches.len() as u64,
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
    pub op: Op,
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
    /// The calls each timed run made: on as many distinct weight copies, or all on one
    /// ([`KernelResult::one_weight`]).
    pub rotation: Rotation,
    /// Whether every call read the same weight copy ([`KernelConfig::one_weight`]).
    pub one_weight: bool,
    /// Timed runs (fewer than asked where the time budget ran out).
    pub runs: usize,
    /// How it was timed.
    pub timing: Timing,
    /// Bytes the reference dequantisation moved: the weight plus `4·K·N`.
    pub dequant_bytes: u64,
    /// The dequantisation of the same tensor to f32, with the rooflines of its traffic.
    pub dequant: GpuFigures,
    /// matvec of every format but F16: dequantise to f16, then the f16 matvec.
    pub unfused: Option<Unfused>,
    /// The CPU cost of recording one call, the one-shot way and with a kept recorder.
    pub recording: RecordingCost,
    /// The kernel variants one call ran ([`crate::gpu::GpuEngine::kernels_for`]), by name,
    /// joined by ` + `: e.g. `matvec.Q4_K.c8.t1.u1.vx.xl8`.
    pub variant: String,
}

/// The CPU side of one call: what recording it costs and creates, two ways, each over
/// [`RECORDING_CALLS`] calls after a warm-up, recorded and never submitted.
///
/// * **One-shot** (`GpuEngine::record_job`, as every `record_*` call was before the recorder): a
///   recorder of its own per call, so a uniform buffer, its bind group, the storage bind groups
///   and a compute pass every time.
/// * **Kept** ([`crate::gpu::kernels::Recorder`], as an engine records step after step): every
///   call into one compute pass, then `finish`, on a recorder that recorded the same calls
///   before (a steady-state step).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordingCost {
    /// Dispatches one call records.
    pub dispatches: u64,
    /// CPU seconds to record one call the one-shot way.
    pub one_shot_seconds: f64,
    /// wgpu objects the kernel layer created per call the one-shot way.
    pub one_shot_objects: f64,
    /// CPU seconds to record one call with the kept recorder.
    pub kept_seconds: f64,
    /// wgpu objects the kernel layer created in the whole steady-state step.
    pub kept_objects: u64,
}

impl RecordingCost {
    /// Kept recording's CPU seconds per dispatch.
    pub fn kept_per_dispatch(&self) -> f64 {
        self.kept_seconds / self.dispatches.max(1) as f64
    }

    /// One-shot recording's CPU seconds per dispatch.
    pub fn one_shot_per_dispatch(&self) -> f64 {
        self.one_shot_seconds / self.dispatches.max(1) as f64
    }
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
        self.op.bandwidth_bound()
    }

    /// Kept recording's CPU time over the call's GPU time: the share recording adds to a step.
    pub fn recording_share(&self) -> f64 {
        self.recording.kept_seconds / self.seconds.max(1e-12)
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

/// Bytes one matmul of `batch` columns on a weight of `shape` (`weight_bytes`) loads and stores,
/// for a kernel covering `tile = (rows, columns)` per pass ([`crate::gpu::GpuEngine::matmul_tile`]):
/// the weight once per column pass, X once per row pass, Y once.
pub fn matmul_traffic(shape: WeightShape, weight_bytes: u64, batch: u32, tile: (u32, u32)) -> u64 {
    let batch = batch as u64;
    weight_bytes * batch.div_ceil(tile.1 as u64)
        + 4 * shape.k * batch * shape.n.div_ceil(tile.0 as u64)
        + 4 * shape.n * batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::rotation::{plan_rotation, HOST_CAP};

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
    fn config_is_off_by_default_and_validated() {
        let c = KernelConfig::default();
        assert!(c.ops.is_empty());
        assert_eq!(c.steps(), 0);
        assert_eq!(c.shapes, DEFAULT_SHAPES);
        assert_eq!(c.matvec_batches, [1]);
        assert!(c.validate(&[Format::Q4_K]).is_ok());
        let on = KernelConfig {
            ops: Op::ALL.to_vec(),
            matvec_batches: vec![1, 8],
            ..KernelConfig::default()
        };
        // One reference, two matvec rows, one matmul, one get_rows, one matvec_id.
        assert_eq!(on.steps(), 6);
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
        // N = 3 rows are not 8 experts for matvec_id; the other kernels take them.
        let e = with(|c| c.shapes = vec![WeightShape::new(512, 3)]).unwrap_err();
        assert!(e.to_string().contains("matvec_id"), "{e}");
        assert!(with(|c| {
            c.shapes = vec![WeightShape::new(512, 3)];
            c.ops.retain(|&o| o != Op::MatVecId);
        })
        .is_ok());
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
            runs: 7,
            timing: Timing::Timestamp,
        };
        let mut r = KernelResult {
            adapter: 0,
            format: Format::Q4_0,
            op: Op::MatVec,
            shape: WeightShape::new(64, 32),
            batch: 2,
            weight_bytes: 1152,
            bytes: 1152,
            flops: Some(2 * 64 * 32 * 2),
            seconds: 1e-6,
            rotation,
            one_weight: false,
            runs: 7,
            timing: Timing::Timestamp,
            dequant_bytes: 1152 + 4 * 64 * 32,
            dequant,
            unfused: Some(Unfused {
                dequant_seconds: 2e-6,
                matvec_seconds: 1e-6,
                rotation,
            }),
            recording: RecordingCost {
                dispatches: 2,
                one_shot_seconds: 4e-6,
                one_shot_objects: 4.0,
                kept_seconds: 5e-8,
                kept_objects: 0,
            },
            variant: "matvec.Q4_0.c2.t1.u1.vx".into(),
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
        assert!(near(r.recording_share(), 0.05));
        assert!(near(r.recording.kept_per_dispatch(), 2.5e-8));
        assert!(near(r.recording.one_shot_per_dispatch(), 2e-6));
        r.op = Op::MatMul;
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

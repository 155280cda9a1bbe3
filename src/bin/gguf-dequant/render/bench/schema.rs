//! The report's JSON schema: what `bench --json` writes and `bench --compare` reads back.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use gguf_dequant::bench::kernels::KernelResult;
use gguf_dequant::bench::{BenchReport, BenchResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the report's JSON layout: 2 added `schema`, `tool`, `version`, `date`, `host`,
/// `n_values`, `warmup`, the adapters' rooflines and rotation target, and the rows' shader copy
/// and rotation; 3 added `kernels` (the inference kernels' rows); 4 added the kernel rows'
/// `recording_*` fields and `matvec_id` rows; 5 added `budget_seconds` and each row's own
/// `runs`. `--compare` reads versions [`OLDEST_SCHEMA`] to this one (a schema 2 report has no
/// kernel rows, a schema 3 report no recording cost).
pub const SCHEMA: u32 = 5;

/// The oldest schema `--compare` reads.
pub const OLDEST_SCHEMA: u32 = 2;

/// A bench report as JSON (schema [`SCHEMA`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: u32,
    /// `gguf-dequant`.
    pub tool: String,
    /// The crate version that wrote it.
    pub version: String,
    /// When it was written: UTC, RFC 3339.
    pub date: String,
    /// The host name, where the system gives one cheaply.
    pub host: Option<String>,
    /// The model whose blocks were decoded (`bench MODEL`); absent: random blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Values every format and dtype decoded.
    pub n_values: u64,
    /// Timed runs per measurement, as asked.
    pub runs: usize,
    /// Untimed runs before them.
    pub warmup: usize,
    /// Seconds each GPU measurement could take (schema 5; `null`: no budget).
    #[serde(default)]
    pub budget_seconds: Option<f64>,
    /// Threads of the CPU "all threads" figure.
    pub cpu_threads: usize,
    /// The adapters, indexed by [`Row::adapter`].
    pub adapters: Vec<Adapter>,
    /// One row per adapter × format × dtype, then the CPU-only formats.
    pub results: Vec<Row>,
    /// One row per adapter × format × shape × kernel × batch (schema 3; absent in schema 2).
    #[serde(default)]
    pub kernels: Vec<KernelRow>,
}

/// One adapter of a [`Report`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Adapter {
    /// Adapter name.
    pub name: String,
    /// `vulkan`, `gl`, `metal`, `dx12`.
    pub backend: String,
    /// wgpu's device type (`DiscreteGpu`, `Cpu`, ...).
    pub device_type: String,
    /// Driver name and version.
    pub driver: String,
    /// `timestamp` or `wall`.
    pub timing: String,
    /// Traffic each timed run aimed to rotate through.
    pub rotation_target_bytes: u64,
    /// matvec (and matmul on CPU adapters) on the integer path, for the formats that have one
    /// (`--precision int8`, or older reports' `--integer-dot`; absent in older reports: false).
    #[serde(default)]
    pub matvec_integer_dot: bool,
    /// How matvec was asked to sum (`bench --precision`: exact, factored, int8, mixed16; absent
    /// in older reports: exact, or int8 where `matvec_integer_dot`).
    #[serde(default)]
    pub precision: Option<String>,
    /// matvec rows of several invocations unrolled, several chunks per loop step (GPUs, unless
    /// `bench --no-unroll`; absent in older reports, whose rows were not: false).
    #[serde(default)]
    pub matvec_unroll: bool,
    /// matvec on the rows mapping for GPUs in this shape, `WxR` (`bench --variant rows:WxR`;
    /// absent or null: the classic mapping).
    #[serde(default)]
    pub matvec_rows: Option<String>,
    /// matvec's variant as `--variant` spells it: `classic` or `rows:WxR[sS]` (absent in older
    /// reports: see `matvec_rows`).
    #[serde(default)]
    pub matvec_variant: Option<String>,
    /// Median over this adapter's rows of the buffer-copy roofline, GB/s (without dequantisation
    /// rows: over its kernel rows' references).
    pub copy_gb_per_s: Option<f64>,
    /// Median over this adapter's rows of the shader-copy roofline, GB/s.
    pub shader_copy_gb_per_s: Option<f64>,
}

/// One (adapter, format, dtype) row of a [`Report`]; the GPU fields are `null` on CPU-only rows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// Index into [`Report::adapters`]; `null` for a format without a shader.
    pub adapter: Option<usize>,
    /// The adapter's backend.
    pub backend: Option<String>,
    /// ggml type name.
    #[serde(rename = "type")]
    pub format: String,
    /// Output dtype.
    pub dtype: String,
    /// Values decoded.
    pub n_values: u64,
    /// Quantised bytes read.
    pub bytes_in: u64,
    /// Output bytes written.
    pub bytes_out: u64,
    /// Median seconds of one dequantisation.
    pub seconds: Option<f64>,
    /// `(bytes_in + bytes_out) / seconds`, GB/s.
    pub gb_per_s: Option<f64>,
    /// Bytes the buffer copy read (and wrote).
    pub copy_bytes: Option<u64>,
    /// Median seconds of one buffer copy.
    pub copy_seconds: Option<f64>,
    /// `2 × copy_bytes / copy_seconds`, GB/s.
    pub copy_gb_per_s: Option<f64>,
    /// `gb_per_s / copy_gb_per_s`.
    pub ratio_to_copy: Option<f64>,
    /// Bytes the shader copy read plus wrote.
    pub shader_copy_bytes: Option<u64>,
    /// Median seconds of one shader copy.
    pub shader_copy_seconds: Option<f64>,
    /// `shader_copy_bytes / shader_copy_seconds`, GB/s.
    pub shader_copy_gb_per_s: Option<f64>,
    /// `gb_per_s / shader_copy_gb_per_s`.
    pub ratio_to_shader_copy: Option<f64>,
    /// Timed runs of the dequantisation, fewer than `runs` where the budget ran out (schema 5).
    #[serde(default)]
    pub runs: Option<usize>,
    /// Distinct buffer pairs each timed run went through.
    pub rotation_pairs: Option<u64>,
    /// Bytes each timed run moved: `rotation_pairs × (bytes_in + bytes_out)`.
    pub rotation_bytes_per_run: Option<u64>,
    /// CPU codecs on one thread, GB/s.
    pub cpu_1t_gb_per_s: Option<f64>,
    /// CPU codecs on all threads, GB/s.
    pub cpu_mt_gb_per_s: Option<f64>,
    /// `timestamp` or `wall`.
    pub timing: Option<String>,
}

/// One (adapter, format, shape, kernel, batch) row of a [`Report`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KernelRow {
    /// Index into [`Report::adapters`].
    pub adapter: usize,
    /// The adapter's backend.
    pub backend: String,
    /// ggml type name of the weight.
    #[serde(rename = "type")]
    pub format: String,
    /// The kernel's name (`matvec`, `matmul`, `get_rows`, `matvec_id`).
    pub kernel: String,
    /// Values per weight row.
    pub k: u64,
    /// Weight rows.
    pub n: u64,
    /// matvec, matmul: columns of X; get_rows: rows gathered per call; matvec_id: experts used.
    pub batch: u32,
    /// Bytes of the weight.
    pub weight_bytes: u64,
    /// Bytes `gb_per_s` counts per call: the weight (matvec, matmul), or the gathered rows'
    /// blocks plus their f32 output (get_rows).
    pub bytes: u64,
    /// `2·K·N·batch` (matvec, matmul); `null` for get_rows.
    pub flops: Option<u64>,
    /// Median seconds of one call.
    pub seconds: Option<f64>,
    /// `bytes / seconds`, GB/s.
    pub gb_per_s: Option<f64>,
    /// `flops / seconds`, GFLOPS.
    pub gflops: Option<f64>,
    /// Bytes the dequantisation of the same tensor to f32 moved (the weight + 4·K·N).
    pub dequant_bytes: u64,
    /// Median seconds of that dequantisation.
    pub dequant_seconds: Option<f64>,
    /// `dequant_bytes / dequant_seconds`, GB/s.
    pub dequant_gb_per_s: Option<f64>,
    /// The buffer-copy roofline measured with that dequantisation, GB/s.
    pub copy_gb_per_s: Option<f64>,
    /// The shader-copy roofline measured with it, GB/s.
    pub shader_copy_gb_per_s: Option<f64>,
    /// `gb_per_s / copy_gb_per_s` (`null` for matmul).
    pub ratio_to_copy: Option<f64>,
    /// `gb_per_s / shader_copy_gb_per_s` (`null` for matmul).
    pub ratio_to_shader_copy: Option<f64>,
    /// `gb_per_s / dequant_gb_per_s` (`null` for matmul).
    pub ratio_to_dequant: Option<f64>,
    /// matvec: median seconds of the dequantisation to f16 (`null` otherwise, and for F16).
    pub unfused_dequant_seconds: Option<f64>,
    /// matvec: median seconds of the f16 matvec on that output.
    pub unfused_matvec_seconds: Option<f64>,
    /// Both.
    pub unfused_seconds: Option<f64>,
    /// `unfused_seconds / seconds`.
    pub fused_speedup: Option<f64>,
    /// Timed runs, fewer than the report's `runs` where the budget ran out (schema 5).
    #[serde(default)]
    pub runs: Option<usize>,
    /// Calls each timed run made, each on a distinct weight copy unless `one_weight`.
    pub rotation_pairs: u64,
    /// Every call on one weight copy (`bench --one-weight`; absent in older reports: false).
    #[serde(default)]
    pub one_weight: bool,
    /// `rotation_pairs × weight_bytes`.
    pub rotation_bytes_per_run: u64,
    /// Buffer pairs of the dequantisation's own rotation.
    pub dequant_rotation_pairs: u64,
    /// Distinct f16 copies of the unfused timings' rotation.
    pub unfused_rotation_pairs: Option<u64>,
    /// `timestamp` or `wall`.
    pub timing: String,
    /// Dispatches one call records (schema 4).
    #[serde(default)]
    pub recording_dispatches: Option<u64>,
    /// CPU µs to record one dispatch with a kept recorder, steady state (schema 4).
    #[serde(default)]
    pub recording_kept_us: Option<f64>,
    /// wgpu objects the kernel layer created in a steady-state step of the kept recorder.
    #[serde(default)]
    pub recording_kept_objects: Option<u64>,
    /// CPU µs to record one dispatch through `GpuEngine::record_*` (a recorder per call).
    #[serde(default)]
    pub recording_one_shot_us: Option<f64>,
    /// wgpu objects the kernel layer created per call that way.
    #[serde(default)]
    pub recording_one_shot_objects: Option<f64>,
    /// Kept recording's CPU time per call ÷ the call's GPU time.
    #[serde(default)]
    pub recording_share: Option<f64>,
    /// The kernel variants one call ran, by name, joined by ` + ` (e.g.
    /// `matvec.Q4_K.c8.t1.u1.vx.xl8`; absent in older reports).
    #[serde(default)]
    pub variant: Option<String>,
}

impl KernelRow {
    /// The row's shape as `KxN`.
    pub fn shape(&self) -> String {
        format!("{}x{}", self.k, self.n)
    }

    /// What identifies the row across reports: type, kernel, shape, batch.
    pub fn key(&self) -> (String, String, u64, u64, u32) {
        (
            self.format.clone(),
            self.kernel.clone(),
            self.k,
            self.n,
            self.batch,
        )
    }
}

/// Where and when a report was made: what the library's [`BenchReport`] does not know.
#[derive(Clone, Debug)]
pub struct Meta {
    /// UTC, RFC 3339.
    pub date: String,
    /// The host name.
    pub host: Option<String>,
}

impl Meta {
    /// Now, on this host (`/proc/sys/kernel/hostname`, else `$HOSTNAME` or `$COMPUTERNAME`).
    pub fn now() -> Meta {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .or_else(|| std::env::var("COMPUTERNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        Meta {
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            host,
        }
    }
}

/// A finite figure, else `None` (JSON `null`).
fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// `report` as JSON of schema [`SCHEMA`]. `adapter` is the index into `adapters` (names repeat
/// across backends: lavapipe and llvmpipe GL are both "llvmpipe").
pub fn report(report: &BenchReport, meta: &Meta) -> Report {
    let of = |i: usize, f: fn(&BenchResult) -> Option<f64>| {
        let v = report
            .results
            .iter()
            .filter(|r| r.adapter == Some(i))
            .filter_map(|r| finite(f(r)))
            .collect();
        median(v)
    };
    // Without dequantisation rows: the rooflines measured with the kernels' references.
    let of_kernels = |i: usize, f: fn(&KernelResult) -> f64| {
        let v = report
            .kernels
            .iter()
            .filter(|r| r.adapter == i)
            .map(f)
            .filter(|v| v.is_finite())
            .collect();
        median(v)
    };
    let adapters = report
        .adapters
        .iter()
        .enumerate()
        .map(|(i, a)| Adapter {
            name: a.name.clone(),
            backend: a.backend.clone(),
            device_type: a.device_type.clone(),
            driver: a.driver.clone(),
            timing: a.timing.name().to_string(),
            rotation_target_bytes: a.rotation_target,
            matvec_integer_dot: a.precision == gguf_dequant::gpu::kernels::Precision::Int8,
            precision: Some(a.precision.to_string()),
            matvec_unroll: a.unroll,
            matvec_rows: a.rows.clone(),
            matvec_variant: Some(
                a.rows
                    .as_ref()
                    .map_or("classic".to_string(), |r| format!("rows:{r}")),
            ),
            copy_gb_per_s: of(i, BenchResult::copy_gb_per_s)
                .or_else(|| of_kernels(i, KernelResult::copy_gb_per_s)),
            shader_copy_gb_per_s: of(i, BenchResult::shader_copy_gb_per_s)
                .or_else(|| of_kernels(i, KernelResult::shader_copy_gb_per_s)),
        })
        .collect();
    let results = report
        .results
        .iter()
        .map(|r| {
            let g = r.gpu;
            Row {
                adapter: r.adapter,
                backend: r.adapter.map(|i| report.adapters[i].backend.clone()),
                format: r.format.name().to_string(),
                dtype: r.dtype.name().to_string(),
                n_values: r.n_values,
                bytes_in: r.bytes_in,
                bytes_out: r.bytes_out,
                seconds: finite(g.map(|g| g.seconds)),
                gb_per_s: finite(r.gb_per_s()),
                copy_bytes: g.map(|g| g.copy_bytes),
                copy_seconds: finite(g.map(|g| g.copy_seconds)),
                copy_gb_per_s: finite(r.copy_gb_per_s()),
                ratio_to_copy: finite(r.ratio_to_copy()),
                shader_copy_bytes: g.map(|g| g.shader_copy_bytes),
                shader_copy_seconds: finite(g.map(|g| g.shader_copy_seconds)),
                shader_copy_gb_per_s: finite(r.shader_copy_gb_per_s()),
                ratio_to_shader_copy: finite(r.ratio_to_shader_copy()),
                runs: g.map(|g| g.runs),
                rotation_pairs: g.map(|g| g.rotation.pairs),
                rotation_bytes_per_run: g.map(|g| g.rotation.bytes_per_run),
                cpu_1t_gb_per_s: finite(r.cpu_1t_gb_per_s),
                cpu_mt_gb_per_s: finite(r.cpu_mt_gb_per_s),
                timing: g.map(|g| g.timing.name().to_string()),
            }
        })
        .collect();
    let kernels = report
        .kernels
        .iter()
        .map(|r| kernel_row(report, r))
        .collect();
    Report {
        schema: SCHEMA,
        tool: env!("CARGO_PKG_NAME").to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        date: meta.date.clone(),
        host: meta.host.clone(),
        model: None,
        n_values: report.results.first().map_or(0, |r| r.n_values),
        runs: report.runs,
        warmup: report.warmup,
        budget_seconds: report.budget,
        cpu_threads: report.cpu_threads,
        adapters,
        results,
        kernels,
    }
}

fn kernel_row(report: &BenchReport, r: &KernelResult) -> KernelRow {
    let u = r.unfused;
    KernelRow {
        adapter: r.adapter,
        backend: report.adapters[r.adapter].backend.clone(),
        format: r.format.name().to_string(),
        kernel: r.op.name().to_string(),
        k: r.shape.k,
        n: r.shape.n,
        batch: r.batch,
        weight_bytes: r.weight_bytes,
        bytes: r.bytes,
        flops: r.flops,
        seconds: finite(Some(r.seconds)),
        gb_per_s: finite(Some(r.gb_per_s())),
        gflops: finite(r.gflops()),
        dequant_bytes: r.dequant_bytes,
        dequant_seconds: finite(Some(r.dequant.seconds)),
        dequant_gb_per_s: finite(Some(r.dequant_gb_per_s())),
        copy_gb_per_s: finite(Some(r.copy_gb_per_s())),
        shader_copy_gb_per_s: finite(Some(r.shader_copy_gb_per_s())),
        ratio_to_copy: finite(r.ratio_to_copy()),
        ratio_to_shader_copy: finite(r.ratio_to_shader_copy()),
        ratio_to_dequant: finite(r.ratio_to_dequant()),
        unfused_dequant_seconds: finite(u.map(|u| u.dequant_seconds)),
        unfused_matvec_seconds: finite(u.map(|u| u.matvec_seconds)),
        unfused_seconds: finite(u.map(|u| u.seconds())),
        fused_speedup: finite(r.fused_speedup()),
        runs: Some(r.runs),
        rotation_pairs: r.rotation.pairs,
        one_weight: r.one_weight,
        rotation_bytes_per_run: r.rotation.bytes_per_run,
        dequant_rotation_pairs: r.dequant.rotation.pairs,
        unfused_rotation_pairs: u.map(|u| u.rotation.pairs),
        timing: r.timing.name().to_string(),
        recording_dispatches: Some(r.recording.dispatches),
        recording_kept_us: finite(Some(r.recording.kept_per_dispatch() * 1e6)),
        recording_kept_objects: Some(r.recording.kept_objects),
        recording_one_shot_us: finite(Some(r.recording.one_shot_per_dispatch() * 1e6)),
        recording_one_shot_objects: finite(Some(r.recording.one_shot_objects)),
        recording_share: finite(Some(r.recording_share())),
        variant: Some(r.variant.clone()),
    }
}

/// Reads a report written by `bench --json` (schema [`SCHEMA`]); every failure is one line
/// naming `path`.
pub fn read_report(path: &Path) -> Result<Report> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("{name}: {e}"))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| anyhow!("{name}: not a JSON file ({e})"))?;
    let schema = match value.get("schema").map(Value::as_u64) {
        None => bail!(
            "{name}: not a bench report of schema {OLDEST_SCHEMA} to {SCHEMA} (no \"schema\" \
             field: reports from before schema {OLDEST_SCHEMA} cannot be compared; run the bench \
             again)"
        ),
        Some(Some(n)) if (u64::from(OLDEST_SCHEMA)..=u64::from(SCHEMA)).contains(&n) => n,
        Some(n) => bail!(
            "{name}: bench report schema {}, this gguf-dequant {} reads schemas {OLDEST_SCHEMA} \
             to {SCHEMA}",
            n.map_or_else(|| value["schema"].to_string(), |n| n.to_string()),
            env!("CARGO_PKG_VERSION")
        ),
    };
    let report: Report = serde_json::from_value(value)
        .map_err(|e| anyhow!("{name}: not a bench report of schema {schema} ({e})"))?;
    if let Some(r) = report
        .results
        .iter()
        .find(|r| r.adapter.is_some_and(|i| i >= report.adapters.len()))
    {
        bail!(
            "{name}: a {} {} row names adapter {:?} of {}",
            r.format,
            r.dtype,
            r.adapter,
            report.adapters.len()
        );
    }
    if let Some(r) = report
        .kernels
        .iter()
        .find(|r| r.adapter >= report.adapters.len())
    {
        bail!(
            "{name}: a {} {} {} row names adapter {} of {}",
            r.format,
            r.kernel,
            r.shape(),
            r.adapter,
            report.adapters.len()
        );
    }
    Ok(report)
}

//! `bench`'s report: the JSON schema ([`Report`], written by [`report`] and read back by
//! [`read_report`] for `--compare`), the table of one run ([`write_table`]) and the table that
//! merges several reports ([`write_compare`]).

use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use gguf_dequant::bench::kernels::{KernelOp, KernelResult};
use gguf_dequant::bench::{BenchReport, BenchResult};
use gguf_dequant::gpu::timing::Timing;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the report's JSON layout: 2 added `schema`, `tool`, `version`, `date`, `host`,
/// `n_values`, `warmup`, the adapters' rooflines and rotation target, and the rows' shader copy
/// and rotation; 3 added `kernels` (the inference kernels' rows). `--compare` reads versions
/// [`OLDEST_SCHEMA`] to this one (a schema 2 report has no kernel rows).
pub const SCHEMA: u32 = 3;

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
    /// Timed runs per measurement.
    pub runs: usize,
    /// Untimed runs before them.
    pub warmup: usize,
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
    /// `matvec`, `matmul` or `get_rows`.
    pub kernel: String,
    /// Values per weight row.
    pub k: u64,
    /// Weight rows.
    pub n: u64,
    /// matvec, matmul: columns of X; get_rows: rows gathered per call.
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
    /// Distinct weight copies each timed run went through.
    pub rotation_pairs: u64,
    /// `rotation_pairs × weight_bytes`.
    pub rotation_bytes_per_run: u64,
    /// Buffer pairs of the dequantisation's own rotation.
    pub dequant_rotation_pairs: u64,
    /// Distinct f16 copies of the unfused timings' rotation.
    pub unfused_rotation_pairs: Option<u64>,
    /// `timestamp` or `wall`.
    pub timing: String,
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
        rotation_pairs: r.rotation.pairs,
        rotation_bytes_per_run: r.rotation.bytes_per_run,
        dequant_rotation_pairs: r.dequant.rotation.pairs,
        unfused_rotation_pairs: u.map(|u| u.rotation.pairs),
        timing: r.timing.name().to_string(),
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

fn fmt(x: Option<f64>, prec: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.prec$}"),
        _ => "-".to_string(),
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// `lo–hi` of the finite values, with `prec` decimals.
fn range(v: impl Iterator<Item = Option<f64>>, prec: usize) -> String {
    let v: Vec<f64> = v.flatten().filter(|x| x.is_finite()).collect();
    let lo = v.iter().copied().reduce(f64::min);
    let hi = v.iter().copied().reduce(f64::max);
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{lo:.prec$}–{hi:.prec$}"),
        _ => "-".to_string(),
    }
}

/// The human-readable table of one run: one section per adapter (with its rooflines and
/// rotation), then the CPU-only formats.
pub fn write_table(report: &BenchReport, out: &mut dyn Write) -> std::io::Result<()> {
    let header = |out: &mut dyn Write| {
        writeln!(
            out,
            "{:<8} {:<5} {:>7} {:>7} {:>8} {:>7} {:>9} {:>6} {:>7} {:>6} {:>5} {:>7} {:>7}",
            "type",
            "dtype",
            "in MiB",
            "out MiB",
            "ms",
            "GB/s",
            "copy GB/s",
            "×copy",
            "shader",
            "×shad",
            "pairs",
            "cpu 1t",
            format!("cpu {}t", report.cpu_threads)
        )
    };
    let n_values = report.results.first().map_or(0, |r| r.n_values);
    for (i, a) in report.adapters.iter().enumerate() {
        writeln!(
            out,
            "adapter {i}: {} ({}, {}, driver {}); GPU times from {}{}",
            a.name,
            a.backend,
            a.device_type,
            a.driver,
            match a.timing {
                Timing::Timestamp => "timestamp queries",
                Timing::Wall => "the wall clock around submit-and-wait",
            },
            if report.results.is_empty() {
                String::new()
            } else {
                format!("; {n_values} values per format")
            }
        )?;
        let rows: Vec<&BenchResult> = report
            .results
            .iter()
            .filter(|r| r.adapter == Some(i))
            .collect();
        if !rows.is_empty() {
            header(out)?;
        }
        for r in &rows {
            writeln!(
                out,
                "{:<8} {:<5} {:>7.2} {:>7.2} {:>8} {:>7} {:>9} {:>6} {:>7} {:>6} {:>5} {:>7} {:>7}",
                r.format.name(),
                r.dtype.name(),
                mib(r.bytes_in),
                mib(r.bytes_out),
                fmt(r.gpu.map(|g| g.seconds * 1e3), 3),
                fmt(r.gb_per_s(), 2),
                fmt(r.copy_gb_per_s(), 2),
                fmt(r.ratio_to_copy(), 3),
                fmt(r.shader_copy_gb_per_s(), 2),
                fmt(r.ratio_to_shader_copy(), 2),
                r.gpu.map_or(0, |g| g.rotation.pairs),
                fmt(r.cpu_1t_gb_per_s, 2),
                fmt(r.cpu_mt_gb_per_s, 2),
            )?;
        }
        let kernels: Vec<&KernelResult> =
            report.kernels.iter().filter(|r| r.adapter == i).collect();
        if rows.is_empty() {
            write_kernels(&kernels, i, out)?;
            writeln!(out)?;
            continue;
        }
        writeln!(
            out,
            "rooflines of adapter {i}: copy_buffer_to_buffer {} GB/s, shader copy {} GB/s; \
             dequantisation {} GB/s = {} of the copy, {} of the shader copy",
            range(rows.iter().map(|r| r.copy_gb_per_s()), 2),
            range(rows.iter().map(|r| r.shader_copy_gb_per_s()), 2),
            range(rows.iter().map(|r| r.gb_per_s()), 2),
            range(rows.iter().map(|r| r.ratio_to_copy()), 3),
            range(rows.iter().map(|r| r.ratio_to_shader_copy()), 2),
        )?;
        writeln!(
            out,
            "rotation on adapter {i}: {} distinct buffer pairs per timed run, {} MiB per run \
             (target {:.0} MiB)",
            range(
                rows.iter().map(|r| r.gpu.map(|g| g.rotation.pairs as f64)),
                0
            ),
            range(
                rows.iter()
                    .map(|r| r.gpu.map(|g| mib(g.rotation.bytes_per_run))),
                0
            ),
            mib(a.rotation_target),
        )?;
        write_kernels(&kernels, i, out)?;
        writeln!(out)?;
    }
    let cpu_only: Vec<&BenchResult> = report.results.iter().filter(|r| r.gpu.is_none()).collect();
    if !cpu_only.is_empty() {
        writeln!(out, "CPU only (no GPU shader):")?;
        header(out)?;
        for r in cpu_only {
            writeln!(
                out,
                "{:<8} {:<5} {:>7.2} {:>7.2} {:>8} {:>7} {:>9} {:>6} {:>7} {:>6} {:>5} {:>7} {:>7}",
                r.format.name(),
                r.dtype.name(),
                mib(r.bytes_in),
                mib(r.bytes_out),
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                fmt(r.cpu_1t_gb_per_s, 2),
                fmt(r.cpu_mt_gb_per_s, 2),
            )?;
        }
        writeln!(out)?;
    }
    if !report.results.is_empty() {
        writeln!(
            out,
            "GB/s = (bytes in + bytes out) / time, median of {} runs, each over `pairs` distinct \
             buffer pairs; copy = copy_buffer_to_buffer of (in + out) / 2 bytes on the same \
             adapter (the same read + written traffic); shader = a WGSL streaming kernel reading \
             the quantised bytes and writing the output bytes (the dequantisers' workgroups, \
             vec4 stores and windows); ×copy, ×shad = GB/s ÷ those",
            report.runs
        )?;
    }
    if !report.kernels.is_empty() {
        writeln!(
            out,
            "kernels: weights [K, N] = N rows of K values, X and Y f32; ms per call, median of {} \
             runs, each over `pairs` distinct weight copies; GB/s = weight bytes / time \
             (get_rows: the gathered rows' blocks + their f32 output); GFLOPS = 2·K·N·batch / \
             time; ×copy, ×shad = GB/s ÷ the rooflines measured with the dequantisation of the \
             same tensor to f32, ×deq = GB/s ÷ that dequantisation's GB/s (in + out); f16 deq, \
             f16 mv = the unfused path (dequantise to f16, then the f16 matvec, our kernels, \
             each timed over `pairs` f16 copies), fused× = (f16 deq + f16 mv) ÷ ms",
            report.runs
        )?;
    }
    Ok(())
}

/// Formats an optional figure in a cell of `width`.
fn cell(x: Option<f64>, prec: usize, width: usize) -> String {
    format!("{:>width$}", fmt(x, prec))
}

/// The kernel rows of adapter `i`, with the dequantisation of the same tensors.
fn write_kernels(rows: &[&KernelResult], i: usize, out: &mut dyn Write) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out, "kernels on adapter {i}:")?;
    writeln!(
        out,
        "{:<8} {:<8} {:<12} {:>5} {:>7} {:>9} {:>7} {:>7} {:>6} {:>6} {:>6} {:>9} {:>9} {:>6} {:>5} {:>8}",
        "type",
        "kernel",
        "K×N",
        "batch",
        "wt MiB",
        "ms",
        "GB/s",
        "GFLOPS",
        "×copy",
        "×shad",
        "×deq",
        "f16 deq",
        "f16 mv",
        "fused×",
        "pairs",
        "deq GB/s",
    )?;
    for r in rows {
        let u = r.unfused;
        writeln!(
            out,
            "{:<8} {:<8} {:<12} {:>5} {:>7.2} {} {} {} {} {} {} {} {} {} {:>5} {}",
            r.format.name(),
            r.op.name(),
            r.shape.to_string(),
            r.batch,
            mib(r.weight_bytes),
            cell(Some(r.seconds * 1e3), 3, 9),
            cell(Some(r.gb_per_s()), 2, 7),
            cell(r.gflops(), 2, 7),
            cell(r.ratio_to_copy(), 3, 6),
            cell(r.ratio_to_shader_copy(), 2, 6),
            cell(r.ratio_to_dequant(), 2, 6),
            cell(u.map(|u| u.dequant_seconds * 1e3), 3, 9),
            cell(u.map(|u| u.matvec_seconds * 1e3), 3, 9),
            cell(r.fused_speedup(), 2, 6),
            r.rotation.pairs,
            cell(Some(r.dequant_gb_per_s()), 2, 8),
        )?;
    }
    let matvec: Vec<&&KernelResult> = rows.iter().filter(|r| r.op == KernelOp::MatVec).collect();
    if !matvec.is_empty() {
        writeln!(
            out,
            "matvec on adapter {i}: {} GB/s of weights = {} of the shader copy, {} of the \
             dequantiser on the same tensor; fused {}× faster than dequantise-to-f16 + f16 matvec",
            range(matvec.iter().map(|r| Some(r.gb_per_s())), 2),
            range(matvec.iter().map(|r| r.ratio_to_shader_copy()), 2),
            range(matvec.iter().map(|r| r.ratio_to_dequant()), 2),
            range(matvec.iter().map(|r| r.fused_speedup()), 2),
        )?;
    }
    Ok(())
}

/// How `--compare` names an adapter of a report: `name (backend)`, with ` @ host` when the
/// reports come from more than one host.
pub fn adapter_label(report: &Report, a: &Adapter, hosts: bool) -> String {
    match (&report.host, hosts) {
        (Some(h), true) => format!("{} ({}) @ {h}", a.name, a.backend),
        _ => format!("{} ({})", a.name, a.backend),
    }
}

/// Whether `reports` come from more than one host.
pub fn several_hosts(reports: &[(String, Report)]) -> bool {
    let mut hosts: Vec<&Option<String>> = reports.iter().map(|(_, r)| &r.host).collect();
    hosts.dedup();
    hosts.len() > 1
}

/// The `(type, dtype)` pairs of the reports' GPU rows, in order of first appearance.
pub fn gpu_pairs(reports: &[(String, Report)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for r in reports.iter().flat_map(|(_, r)| &r.results) {
        let key = (r.format.clone(), r.dtype.clone());
        if r.adapter.is_some() && !pairs.contains(&key) {
            pairs.push(key);
        }
    }
    pairs
}

/// The table of `bench --compare`: the adapters of every report (`(file, report)`), named, with
/// both rooflines, then one line per format and dtype with each adapter's GB/s and ratios.
pub fn write_compare(reports: &[(String, Report)], out: &mut dyn Write) -> std::io::Result<()> {
    let hosts = several_hosts(reports);
    let mut columns: Vec<(&Report, usize)> = Vec::new();
    for (file, r) in reports {
        for (i, a) in r.adapters.iter().enumerate() {
            writeln!(
                out,
                "A{}: {}\n    {}, driver {}, {} timing; host {}, gguf-dequant {}, {} ({file})\n    \
                 {}, rotation target {:.0} MiB; rooflines (median): buffer copy {} GB/s, \
                 shader copy {} GB/s",
                columns.len(),
                adapter_label(r, a, hosts),
                a.device_type,
                a.driver,
                a.timing,
                r.host.as_deref().unwrap_or("?"),
                r.version,
                r.date,
                if r.results.is_empty() {
                    "kernels only".to_string()
                } else {
                    format!("{} values", r.n_values)
                },
                mib(a.rotation_target_bytes),
                fmt(a.copy_gb_per_s, 2),
                fmt(a.shader_copy_gb_per_s, 2),
            )?;
            columns.push((r, i));
        }
    }
    let pairs = gpu_pairs(reports);
    if pairs.is_empty() {
        return write_compare_kernels(&columns, out);
    }
    write!(out, "{:<8} {:<5}", "type", "dtype")?;
    for j in 0..columns.len() {
        write!(
            out,
            " {:>8} {:>6} {:>6}",
            format!("A{j} GB/s"),
            "×copy",
            "×shad"
        )?;
    }
    writeln!(out)?;
    for (format, dtype) in pairs {
        write!(out, "{format:<8} {dtype:<5}")?;
        for &(r, i) in &columns {
            let row = r
                .results
                .iter()
                .find(|x| x.adapter == Some(i) && x.format == format && x.dtype == dtype);
            let (g, c, s) = row.map_or((None, None, None), |x| {
                (x.gb_per_s, x.ratio_to_copy, x.ratio_to_shader_copy)
            });
            write!(out, " {:>8} {:>6} {:>6}", fmt(g, 2), fmt(c, 3), fmt(s, 2))?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "GB/s = (bytes in + bytes out) / time; ×copy = ÷ copy_buffer_to_buffer of the same \
         traffic, ×shad = ÷ the shader copy of the same traffic, each on its own adapter"
    )?;
    write_compare_kernels(&columns, out)
}

/// The kernel rows' keys (type, kernel, shape, batch) of every report, in order of first
/// appearance; a matmul's batch may differ by adapter (32 columns on a CPU adapter), so matmul
/// keys leave it out (0).
pub fn kernel_keys(reports: &[&Report]) -> Vec<(String, String, u64, u64, u32)> {
    let mut keys = Vec::new();
    for r in reports.iter().flat_map(|r| &r.kernels) {
        let key = compare_key(r);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

fn compare_key(r: &KernelRow) -> (String, String, u64, u64, u32) {
    let mut key = r.key();
    if r.kernel == KernelOp::MatMul.name() {
        key.4 = 0;
    }
    key
}

/// `--compare`'s kernel sub-tables, one per kernel: matvec and get_rows with GB/s, ×shad, ×deq
/// (and matvec's fused×), matmul with GFLOPS and its batch, one column group per adapter.
fn write_compare_kernels(columns: &[(&Report, usize)], out: &mut dyn Write) -> std::io::Result<()> {
    let mut reports: Vec<&Report> = columns.iter().map(|(r, _)| *r).collect();
    reports.dedup_by(|a, b| std::ptr::eq(*a, *b));
    let keys = kernel_keys(&reports);
    for op in KernelOp::ALL {
        let keys: Vec<_> = keys.iter().filter(|k| k.1 == op.name()).collect();
        if keys.is_empty() {
            continue;
        }
        writeln!(out)?;
        write!(
            out,
            "{:<8} {:<8} {:<12} {:>5}",
            "type", "kernel", "K×N", "batch"
        )?;
        for j in 0..columns.len() {
            match op {
                KernelOp::MatVec => write!(
                    out,
                    " {:>8} {:>6} {:>6} {:>6}",
                    format!("A{j} GB/s"),
                    "×shad",
                    "×deq",
                    "fused×"
                )?,
                KernelOp::GetRows => write!(
                    out,
                    " {:>8} {:>6} {:>6}",
                    format!("A{j} GB/s"),
                    "×shad",
                    "×deq"
                )?,
                KernelOp::MatMul => write!(out, " {:>10} {:>5}", format!("A{j} GFLOPS"), "batch")?,
            }
        }
        writeln!(out)?;
        for key in keys {
            let batch = if key.4 == 0 {
                "-".to_string()
            } else {
                key.4.to_string()
            };
            write!(
                out,
                "{:<8} {:<8} {:<12} {:>5}",
                key.0,
                key.1,
                format!("{}x{}", key.2, key.3),
                batch
            )?;
            for &(r, i) in columns {
                let row = r
                    .kernels
                    .iter()
                    .find(|x| x.adapter == i && compare_key(x) == *key);
                let get = |f: fn(&KernelRow) -> Option<f64>| row.and_then(f);
                match op {
                    KernelOp::MatVec => write!(
                        out,
                        " {:>8} {:>6} {:>6} {:>6}",
                        fmt(get(|x| x.gb_per_s), 2),
                        fmt(get(|x| x.ratio_to_shader_copy), 2),
                        fmt(get(|x| x.ratio_to_dequant), 2),
                        fmt(get(|x| x.fused_speedup), 2),
                    )?,
                    KernelOp::GetRows => write!(
                        out,
                        " {:>8} {:>6} {:>6}",
                        fmt(get(|x| x.gb_per_s), 2),
                        fmt(get(|x| x.ratio_to_shader_copy), 2),
                        fmt(get(|x| x.ratio_to_dequant), 2),
                    )?,
                    KernelOp::MatMul => write!(
                        out,
                        " {:>10} {:>5}",
                        fmt(get(|x| x.gflops), 2),
                        row.map_or("-".to_string(), |x| x.batch.to_string()),
                    )?,
                }
            }
            writeln!(out)?;
        }
    }
    if !keys.is_empty() {
        writeln!(
            out,
            "kernels: GB/s = weight bytes / time (get_rows: rows read + f32 written); ×shad = ÷ \
             the shader copy, ×deq = ÷ the dequantisation of the same tensor to f32 (in + out), \
             each on its own adapter; fused× = (dequantise to f16 + f16 matvec) ÷ the fused \
             matvec; GFLOPS = 2·K·N·batch / time"
        )?;
    }
    Ok(())
}

//! `bench`'s report: the JSON schema ([`Report`], written by [`report`] and read back by
//! [`read_report`] for `--compare`), the table of one run ([`write_table`]) and the table that
//! merges several reports ([`write_compare`]).

use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use gguf_dequant::bench::{BenchReport, BenchResult};
use gguf_dequant::gpu::timing::Timing;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the report's JSON layout: 2 added `schema`, `tool`, `version`, `date`, `host`,
/// `n_values`, `warmup`, the adapters' rooflines and rotation target, and the rows' shader copy
/// and rotation. `--compare` reads this version only.
pub const SCHEMA: u32 = 2;

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
    /// Median over this adapter's rows of the buffer-copy roofline, GB/s.
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
            copy_gb_per_s: of(i, BenchResult::copy_gb_per_s),
            shader_copy_gb_per_s: of(i, BenchResult::shader_copy_gb_per_s),
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
    Report {
        schema: SCHEMA,
        tool: env!("CARGO_PKG_NAME").to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        date: meta.date.clone(),
        host: meta.host.clone(),
        n_values: report.results.first().map_or(0, |r| r.n_values),
        runs: report.runs,
        warmup: report.warmup,
        cpu_threads: report.cpu_threads,
        adapters,
        results,
    }
}

/// Reads a report written by `bench --json` (schema [`SCHEMA`]); every failure is one line
/// naming `path`.
pub fn read_report(path: &Path) -> Result<Report> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("{name}: {e}"))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| anyhow!("{name}: not a JSON file ({e})"))?;
    match value.get("schema").map(Value::as_u64) {
        None => bail!(
            "{name}: not a bench report of schema {SCHEMA} (no \"schema\" field: reports \
             from before schema {SCHEMA} cannot be compared; run the bench again)"
        ),
        Some(Some(n)) if n == u64::from(SCHEMA) => {}
        Some(n) => bail!(
            "{name}: bench report schema {}, this gguf-dequant {} reads schema {SCHEMA}",
            n.map_or_else(|| value["schema"].to_string(), |n| n.to_string()),
            env!("CARGO_PKG_VERSION")
        ),
    }
    let report: Report = serde_json::from_value(value)
        .map_err(|e| anyhow!("{name}: not a bench report of schema {SCHEMA} ({e})"))?;
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
            "adapter {i}: {} ({}, {}, driver {}); GPU times from {}; {n_values} values per format",
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
        let rows: Vec<&BenchResult> = report
            .results
            .iter()
            .filter(|r| r.adapter == Some(i))
            .collect();
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
    writeln!(
        out,
        "GB/s = (bytes in + bytes out) / time, median of {} runs, each over `pairs` distinct \
         buffer pairs; copy = copy_buffer_to_buffer of (in + out) / 2 bytes on the same adapter \
         (the same read + written traffic); shader = a WGSL streaming kernel reading the \
         quantised bytes and writing the output bytes (the dequantisers' workgroups, vec4 \
         stores and windows); ×copy, ×shad = GB/s ÷ those",
        report.runs
    )?;
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
                 {} values, rotation target {:.0} MiB; rooflines (median): buffer copy {} GB/s, \
                 shader copy {} GB/s",
                columns.len(),
                adapter_label(r, a, hosts),
                a.device_type,
                a.driver,
                a.timing,
                r.host.as_deref().unwrap_or("?"),
                r.version,
                r.date,
                r.n_values,
                mib(a.rotation_target_bytes),
                fmt(a.copy_gb_per_s, 2),
                fmt(a.shader_copy_gb_per_s, 2),
            )?;
            columns.push((r, i));
        }
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
    for (format, dtype) in gpu_pairs(reports) {
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
    Ok(())
}

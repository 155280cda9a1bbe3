//! `bench`'s report as JSON ([`to_json`]) and as a table for people ([`write_table`]).

use std::io::Write;

use gguf_dequant::bench::{BenchReport, BenchResult};
use gguf_dequant::gpu::timing::Timing;
use serde_json::{json, Value};

fn opt(x: Option<f64>) -> Value {
    x.filter(|v| v.is_finite())
        .map_or(Value::Null, |v| json!(v))
}

/// `report` as JSON:
/// `{"adapters": [{"name", "backend", "device_type", "driver", "timing"}], "results":
/// [{"adapter", "backend", "type", "dtype", "n_values", "bytes_in", "bytes_out", "seconds",
/// "gb_per_s", "copy_bytes", "copy_seconds", "copy_gb_per_s", "ratio_to_copy",
/// "cpu_1t_gb_per_s", "cpu_mt_gb_per_s", "timing"}], "runs", "cpu_threads"}`. `adapter` is the
/// index into `adapters` (names repeat across backends: lavapipe and llvmpipe GL are both
/// "llvmpipe"); GPU fields are `null` on CPU-only rows.
pub fn to_json(report: &BenchReport) -> Value {
    let adapters: Vec<Value> = report
        .adapters
        .iter()
        .map(|a| {
            json!({"name": a.name, "backend": a.backend, "device_type": a.device_type,
                   "driver": a.driver, "timing": a.timing.name()})
        })
        .collect();
    let results: Vec<Value> = report
        .results
        .iter()
        .map(|r| {
            let g = r.gpu;
            json!({
                "adapter": r.adapter,
                "backend": r.adapter.map(|i| report.adapters[i].backend.clone()),
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
    json!({"adapters": adapters, "results": results, "runs": report.runs,
           "cpu_threads": report.cpu_threads})
}

/// The human-readable table: one section per adapter, then the CPU-only formats.
pub fn write_table(report: &BenchReport, out: &mut dyn Write) -> std::io::Result<()> {
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
            format!("cpu {}t", report.cpu_threads)
        )
    };
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    for (i, a) in report.adapters.iter().enumerate() {
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
        for r in report.results.iter().filter(|r| r.adapter == Some(i)) {
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
    let cpu_only: Vec<&BenchResult> = report.results.iter().filter(|r| r.gpu.is_none()).collect();
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
        report.runs
    )?;
    Ok(())
}

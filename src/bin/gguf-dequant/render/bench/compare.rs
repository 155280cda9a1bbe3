//! `bench --compare`: several reports (machines, drivers, dates) in one table.

use std::io::Write;

use gguf_dequant::gpu::kernels::Op;

use super::{fmt, mib, Adapter, KernelRow, Report};

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
                 shader copy {} GB/s{}{}{}",
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
                match (a.precision.as_deref(), a.matvec_integer_dot) {
                    (Some("exact") | None, false) => String::new(),
                    (Some(p), _) => format!("; matvec precision {p}"),
                    (None, true) => "; matvec precision int8".to_string(),
                },
                if a.matvec_unroll {
                    "; matvec rows unrolled"
                } else {
                    ""
                },
                match (&a.matvec_variant, &a.matvec_rows) {
                    (Some(v), _) if v != "classic" => format!("; matvec variant {v}"),
                    (None, Some(shape)) => format!("; matvec variant rows:{shape}"),
                    _ => String::new(),
                },
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
    if r.kernel == Op::MatMul.name() {
        key.4 = 0;
    }
    key
}

/// `--compare`'s kernel sub-tables, one per kernel: the bandwidth-bound ones (matvec, get_rows,
/// matvec_id) with GB/s, ×shad, ×deq (and fused× where a row has it), matmul with GFLOPS and its
/// batch, one column group per adapter.
fn write_compare_kernels(columns: &[(&Report, usize)], out: &mut dyn Write) -> std::io::Result<()> {
    let mut reports: Vec<&Report> = columns.iter().map(|(r, _)| *r).collect();
    reports.dedup_by(|a, b| std::ptr::eq(*a, *b));
    let keys = kernel_keys(&reports);
    for &op in Op::ALL {
        let keys: Vec<_> = keys.iter().filter(|k| k.1 == op.name()).collect();
        if keys.is_empty() {
            continue;
        }
        let row_of = |r: &&Report, i: usize, key: &(String, String, u64, u64, u32)| {
            r.kernels
                .iter()
                .find(|x| x.adapter == i && compare_key(x) == *key)
                .cloned()
        };
        let fused = columns.iter().any(|(r, i)| {
            keys.iter()
                .any(|k| row_of(r, *i, k).is_some_and(|x| x.fused_speedup.is_some()))
        });
        writeln!(out)?;
        write!(
            out,
            "{:<8} {:<9} {:<12} {:>5}",
            "type", "kernel", "K×N", "batch"
        )?;
        for j in 0..columns.len() {
            if op.bandwidth_bound() {
                write!(
                    out,
                    " {:>8} {:>6} {:>6}",
                    format!("A{j} GB/s"),
                    "×shad",
                    "×deq"
                )?;
                if fused {
                    write!(out, " {:>6}", "fused×")?;
                }
            } else {
                write!(out, " {:>10} {:>5}", format!("A{j} GFLOPS"), "batch")?;
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
                "{:<8} {:<9} {:<12} {:>5}",
                key.0,
                key.1,
                format!("{}x{}", key.2, key.3),
                batch
            )?;
            for (r, i) in columns {
                let row = row_of(r, *i, key);
                let get = |f: fn(&KernelRow) -> Option<f64>| row.as_ref().and_then(f);
                if op.bandwidth_bound() {
                    write!(
                        out,
                        " {:>8} {:>6} {:>6}",
                        fmt(get(|x| x.gb_per_s), 2),
                        fmt(get(|x| x.ratio_to_shader_copy), 2),
                        fmt(get(|x| x.ratio_to_dequant), 2),
                    )?;
                    if fused {
                        write!(out, " {:>6}", fmt(get(|x| x.fused_speedup), 2))?;
                    }
                } else {
                    write!(
                        out,
                        " {:>10} {:>5}",
                        fmt(get(|x| x.gflops), 2),
                        row.as_ref()
                            .map_or("-".to_string(), |x| x.batch.to_string()),
                    )?;
                }
            }
            writeln!(out)?;
        }
    }
    if !keys.is_empty() {
        writeln!(
            out,
            "kernels: GB/s = weight bytes / time (get_rows: rows read + f32 written; matvec_id: \
             the experts read); ×shad = ÷ the shader copy, ×deq = ÷ the dequantisation of the \
             same tensor to f32 (in + out), each on its own adapter; fused× = (dequantise to f16 \
             + f16 matvec) ÷ the fused matvec; GFLOPS = 2·K·N·batch / time"
        )?;
    }
    Ok(())
}

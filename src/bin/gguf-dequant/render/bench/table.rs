//! The table of one `bench` run.

use std::io::Write;

use gguf_dequant::bench::budget::BUDGET_MIN_RUNS;
use gguf_dequant::bench::kernels::{KernelResult, MOE_EXPERTS, MOE_SLOTS};
use gguf_dequant::bench::{BenchReport, BenchResult};
use gguf_dequant::gpu::kernels::Op;
use gguf_dequant::gpu::timing::Timing;

use super::{cell, fmt, mib, range};

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
            "adapter {i}: {} ({}, {}, driver {}); GPU times from {}{}{}{}{}",
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
            },
            if a.precision == gguf_dequant::gpu::kernels::Precision::Exact {
                String::new()
            } else {
                format!("; matvec precision {} (--precision)", a.precision)
            },
            if a.unroll {
                "; matvec rows unrolled"
            } else {
                ""
            },
            match &a.rows {
                Some(shape) => format!("; matvec variant rows:{shape} (--variant)"),
                None => String::new(),
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
             buffer pairs{}; copy = copy_buffer_to_buffer of (in + out) / 2 bytes on the same \
             adapter (the same read + written traffic); shader = a WGSL streaming kernel reading \
             the quantised bytes and writing the output bytes (the dequantisers' workgroups, \
             vec4 stores and windows); ×copy, ×shad = GB/s ÷ those",
            report.runs,
            budget_note(
                report.budget,
                report.results.iter().filter_map(|r| r.gpu.map(|g| g.runs))
            ),
        )?;
    }
    if !report.kernels.is_empty() {
        writeln!(
            out,
            "kernels: weights [K, N] = N rows of K values, X and Y f32; ms per call, median of {} \
             runs, each of `pairs` calls {}{}; GB/s = weight bytes / time \
             (get_rows: the gathered rows' blocks + their f32 output); GFLOPS = 2·K·N·batch / \
             time; ×copy, ×shad = GB/s ÷ the rooflines measured with the dequantisation of the \
             same tensor to f32, ×deq = GB/s ÷ that dequantisation's GB/s (in + out); f16 deq, \
             f16 mv = the unfused path (dequantise to f16, then the f16 matvec, our kernels, \
             each timed over `pairs` calls likewise), fused× = (f16 deq + f16 mv) ÷ ms; rec µs = CPU \
             time to record one dispatch with a kept Recorder (steady state), objs = wgpu objects \
             its steady-state step created; 1shot = the same for GpuEngine::record_* (a recorder \
             of its own per call: µs per dispatch, objects per call); variant = the kernels one call \
             ran (GpuEngine::kernels_for: family.TYPE, then columns, .t invocations per row or .w \
             per workgroup with .r rows, .u chunks per step, .vx vec4 x, .vw four-word weight \
             reads, .sg subgroup reduction, .int/.fac precision, .xl lanes sharing x, .hf binary16 by the device's conversion); \
             matvec_id: one token, {} of {} experts of N / {} rows",
            report.runs,
            if report.kernels.iter().any(|r| r.one_weight) {
                "on one weight copy (--one-weight: it stays in the GPU's caches where it fits)"
            } else {
                "on as many distinct weight copies"
            },
            budget_note(report.budget, report.kernels.iter().map(|r| r.runs)),
            MOE_SLOTS,
            MOE_EXPERTS,
            MOE_EXPERTS,
        )?;
    }
    Ok(())
}

/// The time budget's rule for rows whose timed runs are `runs`, with the fewest run; nothing
/// without a budget.
fn budget_note(budget: Option<f64>, runs: impl Iterator<Item = usize>) -> String {
    match (budget, runs.min()) {
        (Some(b), Some(fewest)) => format!(
            " (fewer pairs, then fewer runs, at least {BUDGET_MIN_RUNS}, where a measurement \
             would pass its budget of {b} s, or one where a single call takes it all; the fewest \
             runs here: {fewest})"
        ),
        _ => String::new(),
    }
}

/// The kernel rows of adapter `i`, with the dequantisation of the same tensors.
fn write_kernels(rows: &[&KernelResult], i: usize, out: &mut dyn Write) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out, "kernels on adapter {i}:")?;
    writeln!(
        out,
        "{:<8} {:<9} {:<12} {:>5} {:>7} {:>9} {:>7} {:>7} {:>6} {:>6} {:>6} {:>9} {:>9} {:>6} {:>5} {:>8} {:>7} {:>7} {:>5} {:>5}  variant",
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
        "rec µs",
        "1shot",
        "objs",
        "1shot",
    )?;
    for r in rows {
        let u = r.unfused;
        let rec = r.recording;
        writeln!(
            out,
            "{:<8} {:<9} {:<12} {:>5} {:>7.2} {} {} {} {} {} {} {} {} {} {:>5} {} {} {} {:>5} {}  {}",
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
            cell(Some(rec.kept_per_dispatch() * 1e6), 2, 7),
            cell(Some(rec.one_shot_per_dispatch() * 1e6), 1, 7),
            rec.kept_objects,
            cell(Some(rec.one_shot_objects), 1, 5),
            r.variant,
        )?;
    }
    writeln!(
        out,
        "recording on adapter {i}: kept recorder {} µs per dispatch ({} of the call's GPU time), \
         {} wgpu objects per steady-state step; one-shot record_* {} µs per dispatch, {} objects \
         per call",
        range(
            rows.iter()
                .map(|r| Some(r.recording.kept_per_dispatch() * 1e6)),
            2
        ),
        range(rows.iter().map(|r| Some(100.0 * r.recording_share())), 2) + " %",
        range(
            rows.iter().map(|r| Some(r.recording.kept_objects as f64)),
            0
        ),
        range(
            rows.iter()
                .map(|r| Some(r.recording.one_shot_per_dispatch() * 1e6)),
            1
        ),
        range(rows.iter().map(|r| Some(r.recording.one_shot_objects)), 1),
    )?;
    let matvec: Vec<&&KernelResult> = rows.iter().filter(|r| r.op == Op::MatVec).collect();
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

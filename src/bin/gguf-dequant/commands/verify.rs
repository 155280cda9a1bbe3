//! `verify`: every tensor dequantised on the GPU and compared bit-for-bit with the CPU codecs
//! (`--op`: the kernels instead, in [`super::verify_kernels`]).

use std::io::Write;

use anyhow::{bail, Result};
use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::verify::{self, TensorCheck};
use gguf_dequant::GgufFile;
use serde_json::{json, Value as Json};

use crate::args::VerifyArgs;
use crate::backend::{self, GPU};
use crate::progress::Progress;
use crate::render::{self, describe, printable};

/// Verifies `args.file` (with `--op`, its kernels: [`super::verify_kernels`]); an error when any
/// tensor differs.
pub fn run(args: &VerifyArgs) -> Result<()> {
    if let Some(op) = &args.op {
        return super::verify_kernels::run(args, op);
    }
    let backend = backend::choose(args.backend, GPU)?;
    let file = GgufFile::open(&args.file)?;
    let engine = GpuEngine::new(backend)?;
    let total = file.tensors().iter().map(|t| t.n_bytes).sum();
    let bar = Progress::bytes(total, args.report.quiet, args.report.json);
    let checks = verify::verify_file(&file, &engine, args.dtype, &|n| bar.inc(n))?;
    bar.finish();
    let bad = checks.iter().filter(|c| !c.comparison.ok()).count();
    if args.report.json {
        let (backend, adapter) = render::backend_json(Some(&engine));
        let tensors: Vec<Json> = checks.iter().map(check_json).collect();
        render::print_json(&json!({
            "file": render::path_json(&args.file), "backend": backend, "adapter": adapter,
            "dtype": args.dtype.name(), "ok": bad == 0, "tensors": tensors,
        }))?;
    } else {
        let mut out = render::stdout();
        let width = checks
            .iter()
            .map(|c| printable(&c.name).chars().count())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            out,
            "{:<width$}  {:<7} {:>10} {:>10} {:>12} {:>8}  decoded",
            "name", "type", "values", "mismatches", "max_abs_diff", "max_ulp"
        )?;
        for c in &checks {
            let m = &c.comparison;
            writeln!(
                out,
                "{:<width$}  {:<7} {:>10} {:>10} {:>12} {:>8}  {}",
                printable(&c.name),
                c.format.name(),
                m.n_values,
                m.mismatches,
                if m.max_abs_diff == 0.0 {
                    "0".to_string()
                } else {
                    format!("{:.3e}", m.max_abs_diff)
                },
                m.max_ulp,
                if c.gpu { "gpu" } else { "cpu only (no shader)" }
            )?;
        }
        let gpu = checks.iter().filter(|c| c.gpu).count();
        if bad == 0 {
            writeln!(
                out,
                "verify passed: {gpu} of {} tensors decoded on {} bit-identical to the CPU codecs ({})",
                checks.len(),
                describe(&engine),
                args.dtype
            )?;
        }
        out.flush()?;
    }
    if bad > 0 {
        bail!(
            "{bad} of {} tensors differ between the GPU and the CPU codecs",
            checks.len()
        );
    }
    Ok(())
}

/// One tensor's check: `{"name", "type", "gpu", "n_values", "mismatches", "max_abs_diff",
/// "max_ulp", "first_mismatch"}`.
fn check_json(c: &TensorCheck) -> Json {
    let m = &c.comparison;
    json!({
        "name": c.name, "type": c.format.name(), "gpu": c.gpu, "n_values": m.n_values,
        "mismatches": m.mismatches, "max_abs_diff": m.max_abs_diff, "max_ulp": m.max_ulp,
        "first_mismatch": m.first_mismatch,
    })
}

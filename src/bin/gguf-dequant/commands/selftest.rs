//! `selftest`: the built-in sample of every format decoded on one adapter (or every one, with
//! `--backend all`) and checked against the CPU codecs, which are checked against recorded digests.

use std::io::Write;

use anyhow::{bail, Result};
use gguf_dequant::gpu::{EngineOptions, GpuEngine};
use gguf_dequant::selftest::{self, GpuSample};
use gguf_dequant::verify::Comparison;
use gguf_dequant::{Backend, Format};
use serde_json::{json, Value as Json};

use crate::args::SelftestArgs;
use crate::backend::{self, ADAPTERS};
use crate::render::{self, describe};

/// Runs the selftest; an error when anything differs.
pub fn run(args: &SelftestArgs) -> Result<()> {
    let backend = backend::choose(args.backend, ADAPTERS)?;
    let cpu = selftest::run_cpu()?;
    let cpu_ok = cpu.iter().all(|(_, ok)| *ok);
    let engines = match engines(backend) {
        Ok(engines) => engines,
        Err(e) => {
            if !args.json {
                match crate::hint::hint(&e) {
                    Some(hint) => eprintln!("note: {e} (hint: {hint})"),
                    None => eprintln!("note: {e}"),
                }
                eprintln!("running the CPU codecs alone");
            }
            Vec::new()
        }
    };
    let mut runs = Vec::with_capacity(engines.len());
    for engine in engines {
        let samples = selftest::run_gpu(&engine)?;
        runs.push((engine, samples));
    }
    let gpu_ok = runs.iter().all(|(_, s)| s.iter().all(GpuSample::ok));
    let ok = cpu_ok && gpu_ok;
    if args.json {
        let cpu: Vec<Json> = cpu
            .iter()
            .map(|(f, ok)| json!({"type": f.name(), "ok": ok}))
            .collect();
        let report = if backend == Backend::All {
            let adapters: Vec<Json> = runs
                .iter()
                .map(|(engine, samples)| {
                    let (backend, adapter) = render::backend_json(Some(engine));
                    json!({"backend": backend, "adapter": adapter,
                           "ok": samples.iter().all(GpuSample::ok), "gpu": samples_json(samples)})
                })
                .collect();
            json!({"ok": ok, "adapters": adapters, "cpu": cpu})
        } else {
            let (backend, adapter) = render::backend_json(runs.first().map(|r| &r.0));
            let samples = runs.first().map_or(&[][..], |r| &r.1[..]);
            json!({"backend": backend, "adapter": adapter, "ok": ok,
                   "gpu": samples_json(samples), "cpu": cpu})
        };
        render::print_json(&report)?;
    } else {
        write_text(&runs, &cpu, cpu_ok)?;
    }
    if !ok {
        bail!("selftest failed");
    }
    Ok(())
}

/// The engines `backend` names: every compute adapter that opens for [`Backend::All`]
/// ([`backend::open_each`]), else the best one.
fn engines(backend: Backend) -> gguf_dequant::Result<Vec<GpuEngine>> {
    if backend != Backend::All {
        return Ok(vec![GpuEngine::new(backend)?]);
    }
    backend::open_each(backend, |a| {
        GpuEngine::from_adapter(a, EngineOptions::default())
    })
}

fn samples_json(samples: &[GpuSample]) -> Vec<Json> {
    samples
        .iter()
        .map(|s| {
            json!({"type": s.format.name(), "n_values": s.f32.n_values,
                   "f32_mismatches": s.f32.mismatches, "f16_mismatches": s.f16.mismatches})
        })
        .collect()
}

/// One table per adapter, with its verdict when everything passed; then what differs on the CPU.
fn write_text(
    runs: &[(GpuEngine, Vec<GpuSample>)],
    cpu: &[(Format, bool)],
    cpu_ok: bool,
) -> Result<()> {
    let mut out = render::stdout();
    let verdict = |c: &Comparison| {
        if c.ok() {
            "ok".to_string()
        } else {
            format!("{} differ", c.mismatches)
        }
    };
    for (engine, samples) in runs {
        writeln!(out, "adapter: {}", describe(engine))?;
        writeln!(
            out,
            "{:<8} {:>6} {:>7}  {:<10} {:<10}",
            "type", "blocks", "values", "f32", "f16"
        )?;
        for s in samples {
            writeln!(
                out,
                "{:<8} {:>6} {:>7}  {:<10} {:<10}",
                s.format.name(),
                selftest::sample_len(s.format),
                s.f32.n_values,
                verdict(&s.f32),
                verdict(&s.f16)
            )?;
        }
        if cpu_ok && samples.iter().all(GpuSample::ok) {
            writeln!(
                out,
                "selftest passed: {} formats bit-identical on {} and the CPU codecs; \
                 the CPU codecs of all {} formats match their recorded output ({} have no shader)",
                samples.len(),
                describe(engine),
                Format::ALL.len(),
                Format::ALL.len() - samples.len()
            )?;
        }
    }
    let bad: Vec<&str> = cpu
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(f, _)| f.name())
        .collect();
    if !bad.is_empty() {
        writeln!(
            out,
            "CPU codecs differ from their recorded output: {}",
            bad.join(", ")
        )?;
    }
    if runs.is_empty() && cpu_ok {
        writeln!(
            out,
            "selftest passed on the CPU only: the codecs of all {} formats match their recorded output",
            Format::ALL.len()
        )?;
    }
    out.flush()?;
    Ok(())
}

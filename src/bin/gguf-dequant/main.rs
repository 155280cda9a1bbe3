//! The `gguf-dequant` command: a thin layer over the `gguf_dequant` library.

mod args;

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use clap::Parser;
use gguf_dequant::dequant::{self, Decoder};
use gguf_dequant::gpu::{self, GpuEngine};
use gguf_dequant::output::OutputFormat;
use gguf_dequant::{inspect, GgufFile};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use args::{Backend, Cli, Command};

fn main() -> ExitCode {
    quiet_headless_wayland();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// On a headless machine Mesa's Vulkan driver probes for a Wayland display, and libwayland prints
/// `error: XDG_RUNTIME_DIR is invalid or not set` for each probe: noise that reads like our own
/// errors. Point the variable at the temporary directory when it is unset (before any thread runs).
fn quiet_headless_wayland() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none()
        && std::env::var_os("WAYLAND_DISPLAY").is_none()
    {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Inspect { file, json } => {
            let file = GgufFile::open(&file)?;
            let mut out = io::BufWriter::new(io::stdout().lock());
            if json {
                // Rendered first, so that a closed pipe surfaces as an io::Error when written.
                let text = serde_json::to_string_pretty(&inspect::to_json(&file))?;
                writeln!(out, "{text}")?;
            } else {
                inspect::write_text(&file, &mut out)?;
            }
            out.flush()?;
        }
        Command::Dequant {
            file,
            tensors,
            out,
            dtype,
            backend,
            quiet,
        } => {
            let file = GgufFile::open(&file)?;
            let selected = dequant::select(&file, &tensors)?;
            OutputFormat::from_path(&out)?.check(&out, selected.len(), dtype)?;
            let engine = gpu_engine(backend)?;
            let decoder = engine.as_ref().map_or(Decoder::Cpu, Decoder::Gpu);
            let total: u64 = selected.iter().map(|t| t.n_bytes).sum();
            let bar = progress_bar(total, quiet);
            let start = Instant::now();
            let summary =
                dequant::dequant_file(&file, &tensors, &out, dtype, decoder, &|n| bar.inc(n))?;
            bar.finish_and_clear();
            if !summary.cpu_fallback.is_empty() {
                let names: Vec<&str> = summary.cpu_fallback.iter().map(|f| f.name()).collect();
                eprintln!(
                    "note: {} ha{} no GPU shader yet; converted by the CPU codecs",
                    names.join(", "),
                    if names.len() == 1 { "s" } else { "ve" }
                );
            }
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "wrote {} ({} tensor{}, {} values as {dtype}) in {secs:.2} s, {:.2} GB/s of quantised input",
                out.display(),
                summary.tensors,
                if summary.tensors == 1 { "" } else { "s" },
                summary.values,
                summary.bytes_read as f64 / secs / 1e9,
            );
        }
    }
    Ok(())
}

/// The GPU engine for `backend`, or `None` for the CPU codecs. `auto` without any adapter falls back
/// to the CPU with a note; a named backend without an adapter is an error.
fn gpu_engine(backend: Backend) -> Result<Option<GpuEngine>> {
    let Some(gpu_backend) = backend.gpu() else {
        return Ok(None);
    };
    match GpuEngine::new(gpu_backend) {
        Ok(engine) => {
            let info = engine.adapter_info();
            eprintln!(
                "using {} ({:?}, {:?})",
                info.name, info.backend, info.device_type
            );
            Ok(Some(engine))
        }
        Err(gguf_dequant::Error::Gpu(gpu::GpuError::NoAdapter { .. }))
            if backend == Backend::Auto && gpu::Backend::from_env()?.is_none() =>
        {
            eprintln!("note: no GPU adapter found; decoding with the CPU codecs");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// A byte-count progress bar on stderr, drawn only when stderr is a terminal and not `--quiet`.
fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar
}

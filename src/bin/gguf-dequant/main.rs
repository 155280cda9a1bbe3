//! The `gguf-dequant` command: a thin layer over the `gguf_dequant` library.

mod args;
mod commands;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    quiet_headless_wayland();
    let result = match Cli::parse().command {
        Command::Selftest { backend, json } => commands::selftest(backend, json),
        Command::Adapters { json } => commands::adapters(json),
        Command::Inspect { file, json } => commands::inspect(&file, json),
        Command::Load {
            file,
            dtype,
            backend,
            tensors,
            globs,
            source,
            staging_mib,
            report,
        } => commands::load(commands::Load {
            file: &file,
            residency: dtype,
            backend,
            tensors,
            globs,
            source,
            staging_bytes: staging_mib << 20,
            json: report.json,
            quiet: report.quiet,
        }),
        Command::Verify {
            file,
            backend,
            dtype,
            report,
        } => commands::verify(&file, backend, dtype, report.json, report.quiet),
        Command::Convert {
            file,
            out,
            dtype,
            backend,
            report,
        } => commands::convert(&file, &out, dtype, backend, report.json, report.quiet),
        Command::Dequant {
            file,
            tensors,
            out,
            dtype,
            backend,
            quiet,
        } => commands::Dequant {
            file: &file,
            tensors: &tensors,
            out: &out,
            dtype,
            backend,
            metadata: false,
            json: false,
            quiet,
        }
        .run(),
        Command::Bench(args) => commands::bench(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let hint = e
                .downcast_ref::<gguf_dequant::Error>()
                .and_then(|e| e.hint());
            let _ = match hint {
                Some(hint) => writeln!(io::stderr(), "error: {e} (hint: {hint})"),
                None => writeln!(io::stderr(), "error: {e}"),
            };
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

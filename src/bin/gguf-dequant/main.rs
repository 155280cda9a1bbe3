//! The `gguf-dequant` command: a thin layer over the `gguf_dequant` library. Parse, run, exit:
//! 0 success, 1 error (one `error:` line on stderr, with a hint where there is one), 2 usage
//! (clap's own message). A closed stdout pipe is success.

mod args;
mod backend;
mod commands;
mod hint;
mod progress;
mod render;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    quiet_headless_wayland();
    match commands::run(args::Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let hint = e.downcast_ref::<gguf_dequant::Error>().and_then(hint::hint);
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

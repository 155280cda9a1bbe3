//! The tests that run the `gguf-dequant` binary as a user does: exit codes, one-line errors and
//! outputs read back (by this crate and by numpy / safetensors), the hostile-file corpus, and the
//! GPU commands (`selftest`, `adapters`, `verify`, `convert`, `load`, `load --devices`, `bench`,
//! `apply`).
//!
//! One binary, one module per topic in `tests/commands/<topic>.rs` (a crate root's `mod x;` would
//! look in `tests/`, hence the `#[path]`s); shared helpers in `tests/support/`.
#![cfg(feature = "cli")]

pub mod support;

#[cfg(feature = "gpu")]
#[path = "commands/apply.rs"]
mod apply;
#[cfg(feature = "gpu")]
#[path = "commands/bench_cli.rs"]
mod bench_cli;
#[path = "commands/cli.rs"]
mod cli;
#[cfg(feature = "gpu")]
#[path = "commands/cli_gpu.rs"]
mod cli_gpu;
#[path = "commands/dequant_python.rs"]
mod dequant_python;
#[path = "commands/hostile.rs"]
mod hostile;
#[path = "commands/inspect.rs"]
mod inspect;
#[cfg(feature = "gpu")]
#[path = "commands/load_devices.rs"]
mod load_devices;
#[path = "commands/split_sets.rs"]
mod split_sets;

//! Shared helpers for integration tests that need the oracle fixtures or the real models that
//! `scripts/test.sh` puts in the cache (`$GGUF_DEQUANT_CACHE`, default `~/.cache/gguf-dequant`).
//!
//! * `GGUF_DEQUANT_ORACLE`: fixtures made by `scripts/oracle/` (`manifest.json`, `inspect/`, `models/`).
//! * `GGUF_DEQUANT_MODELS`: the real GGUF models.
//!
//! When a variable or file is missing, the helpers panic under `CI=true` (no silent skips in CI) and
//! otherwise print a loud `SKIPPED` line and return `None`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The real models `scripts/test.sh` downloads into `$GGUF_DEQUANT_MODELS`.
pub const MODEL_FILES: &[&str] = &[
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
];

/// Whether this run is CI (`CI=true` or `CI=1`): missing test data is then an error.
pub fn is_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true") | Ok("1"))
}

/// Test data is missing: panic in CI, else print a loud skip notice.
pub fn missing(test: &str, what: &str) {
    if is_ci() {
        panic!("{test}: {what} (CI=true: missing test data is an error; run scripts/test.sh)");
    }
    eprintln!("\n*** SKIPPED {test}: {what}. Run scripts/test.sh to fetch/generate it. ***\n");
}

/// The directory named by env variable `var`, or `None` (after [`missing`]) when unset or absent.
pub fn env_dir(test: &str, var: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        None => {
            missing(test, &format!("{var} is not set"));
            None
        }
        Some(v) => {
            let p = PathBuf::from(v);
            if p.is_dir() {
                Some(p)
            } else {
                missing(test, &format!("{var}={} is not a directory", p.display()));
                None
            }
        }
    }
}

/// `$GGUF_DEQUANT_ORACLE/<rel>` if it exists.
pub fn oracle_file(test: &str, rel: &str) -> Option<PathBuf> {
    let p = env_dir(test, "GGUF_DEQUANT_ORACLE")?.join(rel);
    if p.is_file() {
        Some(p)
    } else {
        missing(test, &format!("oracle file {} does not exist", p.display()));
        None
    }
}

/// `$GGUF_DEQUANT_MODELS/<file>` if it exists.
pub fn model_file(test: &str, file: &str) -> Option<PathBuf> {
    let p = env_dir(test, "GGUF_DEQUANT_MODELS")?.join(file);
    if p.is_file() {
        Some(p)
    } else {
        missing(test, &format!("model {} does not exist", p.display()));
        None
    }
}

/// Runs the `gguf-dequant` binary with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gguf-dequant"))
        .args(args)
        .output()
        .unwrap()
}

/// Lossy UTF-8 of a command's output.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether `adapters --json` lists a compute adapter of `backend` (`vulkan`, `gl`, ...); without
/// one, [`missing`] (a loud skip, or a failure under CI).
pub fn have(backend: &str, test: &str) -> bool {
    let o = run(&["adapters", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let found = json["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["backend"] == backend && a["compute"] == true);
    if !found {
        missing(
            test,
            &format!("no {backend} adapter (install mesa-vulkan-drivers)"),
        );
    }
    found
}

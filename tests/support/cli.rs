//! Running the `gguf-dequant` binary as a user does.

use std::process::{Command, Output};

/// The binary cargo built for these tests.
pub const EXE: &str = env!("CARGO_BIN_EXE_gguf-dequant");

/// A command for the binary.
pub fn bin() -> Command {
    Command::new(EXE)
}

/// Runs the binary with `args`.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("the binary runs")
}

/// Lossy UTF-8 of a command's output.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A command's stderr, lossy UTF-8.
pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// Whether `adapters --json` lists a compute adapter of `backend` (`vulkan`, `gl`, ...); without
/// one, [`super::missing`] (a loud skip, or a failure under CI).
pub fn have(backend: &str, test: &str) -> bool {
    let o = run(&["adapters", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let found = json["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["backend"] == backend && a["compute"] == true);
    if !found {
        super::missing(
            test,
            &format!("no {backend} adapter (install mesa-vulkan-drivers)"),
        );
    }
    found
}

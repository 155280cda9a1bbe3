//! The one support module of the integration tests, included by every test binary as
//! `pub mod support;` (`pub` so that helpers a binary does not use are not dead code there).
//!
//! * here: the test data `scripts/test.sh` puts in the cache (`$GGUF_DEQUANT_CACHE`, default
//!   `~/.cache/gguf-dequant`) and the skip-or-fail policy for anything missing:
//!   * `GGUF_DEQUANT_ORACLE`: fixtures made by `scripts/oracle/` (`manifest.json`, `inspect/`,
//!     `models/`, `quantized/`);
//!   * `GGUF_DEQUANT_MODELS`: the real GGUF models ([`MODEL_FILES`]);
//!   * `GGUF_DEQUANT_PYTHON`: a Python with numpy and safetensors;
//!   * `GGUF_DEQUANT_EXPECT_ADAPTERS`: the adapters the run must have ([`expected_adapters`]).
//!
//!   When a variable or file is missing, the helpers panic under `CI=true` (no silent skips in CI)
//!   and otherwise print a loud `SKIPPED` line and return `None`.
//! * [`spec_tables`]: the spec's lookup tables, `spec/tables.json` in the repository.
//! * [`shader`]: WGSL validated and translated by naga, as the shader tests check it.
//! * [`rng`]: the one PRNG of the tests (splitmix64) and random blocks with finite scales.
//! * [`codec`]: the CPU codecs as the tests call them, and bit-for-bit comparison of outputs.
//! * [`gguf`]: files built with the library's `GgufWriter`, and [`gguf::Raw`] for malformed ones.
//! * [`kernel_plan`]: the kernels' dispatches planned without a GPU, arbitrary cases and the
//!   invariants of their plans (also included by the `kernel_plan` fuzz target).
//! * [`gpu`] (feature `gpu`): the [`gpu_test!`](crate::support::gpu::gpu_test) macro, which runs a
//!   test once on every compute adapter and owns the adapter skip-or-fail policy; the only place
//!   the tests create engines.
//! * [`cli`] (feature `cli`): running the `gguf-dequant` binary.

#[cfg(feature = "cli")]
pub mod cli;
pub mod codec;
pub mod gguf;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod kernel_plan;
pub mod rng;
pub mod shader;

use std::path::PathBuf;

/// The real models `scripts/test.sh` downloads into `$GGUF_DEQUANT_MODELS`.
pub const MODEL_FILES: &[&str] = &[
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
];

/// The spec's lookup tables (`spec/tables.json`, copied verbatim from the format spec: ggml's
/// `ggml-common.h` tables as data), parsed.
pub fn spec_tables() -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/tables.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {} ({e})", path.display()));
    serde_json::from_str(&text).expect("spec/tables.json is valid JSON")
}

/// Whether this run is CI (`CI=true` or `CI=1`): missing test data or adapters are then errors.
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

/// `GGUF_DEQUANT_EXPECT_ADAPTERS`, set by `scripts/test.sh`: comma-separated `backend:name`
/// entries (`vulkan:llvmpipe,vulkan:SwiftShader,gl:llvmpipe`), each naming a compute adapter the
/// run must have by its backend (as `gguf-dequant` names it) and a substring of its name.
/// `None` (after [`missing`]: a failure under `CI=true`) when unset.
pub fn expected_adapters(test: &str) -> Option<Vec<(String, String)>> {
    const VAR: &str = "GGUF_DEQUANT_EXPECT_ADAPTERS";
    let Ok(list) = std::env::var(VAR) else {
        missing(test, &format!("{VAR} is not set (scripts/test.sh sets it)"));
        return None;
    };
    let entries: Vec<(String, String)> = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (backend, name) = e
                .split_once(':')
                .unwrap_or_else(|| panic!("{VAR}: `{e}` is not backend:name"));
            (backend.trim().to_lowercase(), name.trim().to_string())
        })
        .collect();
    assert!(!entries.is_empty(), "{VAR}=`{list}` names no adapter");
    Some(entries)
}

/// `$GGUF_DEQUANT_PYTHON`, or `None` (after [`missing`]) when unset.
pub fn python(test: &str) -> Option<String> {
    match std::env::var("GGUF_DEQUANT_PYTHON") {
        Ok(p) => Some(p),
        Err(_) => {
            missing(test, "GGUF_DEQUANT_PYTHON is not set");
            None
        }
    }
}

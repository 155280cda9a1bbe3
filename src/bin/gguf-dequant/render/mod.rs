//! Presentation: what the commands print, and how (stdout, JSON, the names of adapters).

pub mod bench;
pub mod inspect;
pub mod svg;

use std::io::{self, Write};
use std::path::Path;

use anyhow::Result;
use gguf_dequant::gpu::GpuEngine;
use serde_json::{json, Value as Json};

/// File-controlled names for the terminal (kept in `inspect`, which the fuzz target compiles
/// alone).
pub use inspect::printable;

/// Buffered, locked stdout.
pub fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::new(io::stdout().lock())
}

/// `value` as pretty JSON on stdout.
pub fn print_json(value: &Json) -> Result<()> {
    // Rendered first, so that a closed pipe surfaces as an io::Error when written.
    let text = serde_json::to_string_pretty(value)?;
    let mut out = stdout();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

/// A path as a JSON string (lossily, should it not be UTF-8).
pub fn path_json(path: &Path) -> Json {
    Json::from(path.to_string_lossy().into_owned())
}

/// The engine's adapter for people: `name (Backend, DeviceType)`.
pub fn describe(engine: &GpuEngine) -> String {
    let info = engine.adapter_info();
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

/// The `"backend"` and `"adapter"` fields of a JSON report: the adapter's API (`vulkan`, `gl`, ...)
/// and name, or `"cpu"` and `null` without an engine.
pub fn backend_json(engine: Option<&GpuEngine>) -> (Json, Json) {
    match engine {
        Some(e) => {
            let info = e.adapter_info();
            (
                json!(info.backend.to_string().to_lowercase()),
                json!(info.name),
            )
        }
        None => (json!("cpu"), Json::Null),
    }
}

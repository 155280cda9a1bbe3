//! `--backend`: which of the library's [`Backend`]s each command takes, and the environment
//! variable [`ENV`] that stands in for a `--backend` not given. (The library reads no environment.)

use anyhow::{bail, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::ValueEnum;
use gguf_dequant::Backend;

/// The environment variable that picks the backend when `--backend` is not given.
pub const ENV: &str = "GGUF_DEQUANT_BACKEND";

/// `dequant` and `convert`: one GPU adapter, or the CPU codecs.
pub const DECODE: &[Backend] = &[
    Backend::Auto,
    Backend::Vulkan,
    Backend::Gl,
    Backend::Metal,
    Backend::Dx12,
    Backend::Cpu,
];

/// `verify` and `load`: one GPU adapter.
pub const GPU: &[Backend] = &[
    Backend::Auto,
    Backend::Vulkan,
    Backend::Gl,
    Backend::Metal,
    Backend::Dx12,
];

/// `bench` and `selftest`: one GPU adapter, or every one (`all`).
pub const ADAPTERS: &[Backend] = &[
    Backend::Auto,
    Backend::All,
    Backend::Vulkan,
    Backend::Gl,
    Backend::Metal,
    Backend::Dx12,
];

/// A clap parser that accepts exactly the names of `subset` (so `--help` lists only those, and
/// any other name is a usage error).
pub fn parser(subset: &'static [Backend]) -> impl TypedValueParser<Value = Backend> {
    PossibleValuesParser::new(subset.iter().filter_map(Backend::to_possible_value))
        .try_map(|name| name.parse::<Backend>())
}

/// The backend a command runs on: `flag` when `--backend` was given, else the one [`ENV`] names
/// (which must be one of `subset`; unset or empty is no choice), else [`Backend::Auto`].
pub fn choose(flag: Option<Backend>, subset: &[Backend]) -> Result<Backend> {
    if let Some(b) = flag {
        return Ok(b);
    }
    let Ok(value) = std::env::var(ENV) else {
        return Ok(Backend::Auto);
    };
    if value.trim().is_empty() {
        return Ok(Backend::Auto);
    }
    let names: Vec<&str> = subset.iter().map(|b| b.name()).collect();
    let takes = format!("this command takes {}", names.join(", "));
    match value.parse::<Backend>() {
        Ok(b) if subset.contains(&b) => Ok(b),
        Ok(_) => bail!("{ENV}={value}: {takes}"),
        Err(_) => bail!("{ENV}={value}: unknown backend; {takes}"),
    }
}

/// Opens with `open` the adapters `backend` names: the best one, or for [`Backend::All`] every
/// compute adapter, where one that fails to open is named on stderr and skipped (an error only
/// when none opens), so that a listed adapter that cannot give a device (NVIDIA's OpenGL through
/// EGL on a machine without a display, say) does not hide the others.
pub fn open_each<T>(
    backend: Backend,
    mut open: impl FnMut(&wgpu::Adapter) -> gguf_dequant::Result<T>,
) -> gguf_dequant::Result<Vec<T>> {
    let all = backend == Backend::All;
    let adapters = gguf_dequant::gpu::compute_adapters(backend)?;
    let mut opened = Vec::new();
    let mut first_error = None;
    for adapter in adapters.iter().take(if all { usize::MAX } else { 1 }) {
        match open(adapter) {
            Ok(t) => opened.push(t),
            Err(e) if all => {
                eprintln!("note: skipping an adapter: {e}");
                first_error.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    match first_error {
        Some(e) if opened.is_empty() => Err(e),
        _ => Ok(opened),
    }
}

//! `bench`: GPU dequantisation throughput per adapter × format × dtype, next to a buffer copy of
//! the same traffic and the CPU codecs. The table goes to stdout (or the JSON with `--json -`),
//! progress to stderr.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Result};
use gguf_dequant::bench::{self, BenchAdapter, BenchConfig};
use gguf_dequant::{Backend, DType, Format};

use crate::args::BenchArgs;
use crate::backend::{self, ADAPTERS};
use crate::progress::Progress;
use crate::render::{self, svg};

/// Runs the benchmark and writes its table, JSON and chart.
pub fn run(args: &BenchArgs) -> Result<()> {
    let formats = formats(&args.types)?;
    let dtypes = match args.dtype.trim().to_ascii_lowercase().as_str() {
        "both" => vec![DType::F32, DType::F16],
        "all" => DType::ALL.to_vec(),
        one => vec![one.parse::<DType>().map_err(anyhow::Error::msg)?],
    };
    if !(args.mib > 0.0 && args.mib.is_finite()) {
        bail!("--mib must be a positive number of MiB");
    }
    let json_stdout = args.json.as_deref() == Some(Path::new("-"));
    let backend = backend::choose(args.backend, ADAPTERS)?;
    let adapters = if formats.iter().any(|&f| f.has_shader()) {
        BenchAdapter::open(backend, backend == Backend::All, args.wall)?
    } else {
        Vec::new()
    };
    let mut config = BenchConfig::new(formats, dtypes, args.mib);
    config.runs = args.runs as usize;
    config.cpu = !args.no_cpu;

    let bar = Progress::steps(args.quiet, json_stdout);
    let report = bench::run(&config, &adapters, &|s| bar.step(s.done, s.total, s.what))?;
    bar.finish();

    if let Some(path) = &args.svg {
        svg::write_svg(&report, path)?;
    }
    let value = render::bench::to_json(&report);
    match &args.json {
        Some(_) if json_stdout => return render::print_json(&value),
        Some(path) => {
            let text = serde_json::to_string_pretty(&value)?;
            std::fs::write(path, text + "\n")
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        }
        None => {}
    }
    let mut out = render::stdout();
    render::bench::write_table(&report, &mut out)?;
    if let Some(path) = &args.svg {
        writeln!(out, "chart: {}", path.display())?;
    }
    out.flush()?;
    Ok(())
}

/// `--types`: ggml names, comma-separated (each once), or `all` = every format with a shader.
fn formats(types: &str) -> Result<Vec<Format>> {
    if types.trim().eq_ignore_ascii_case("all") {
        return Ok(gguf_dequant::formats::WITH_SHADER.to_vec());
    }
    let mut formats = Vec::new();
    for name in types.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match Format::from_name(name) {
            Some(f) if !formats.contains(&f) => formats.push(f),
            Some(_) => {}
            None => bail!("--types: unknown ggml type `{name}`"),
        }
    }
    if formats.is_empty() {
        bail!("--types: no type given");
    }
    Ok(formats)
}

//! `bench`: GPU dequantisation throughput per adapter × format × dtype, next to two rooflines of
//! the same traffic (a buffer copy, a shader copy) and the CPU codecs, and with `--kernels` the
//! inference kernels on weights of real models' shapes. The table goes to stdout
//! (or the JSON with `--json -`), progress to stderr. `--compare` merges earlier reports instead.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Result};
use gguf_dequant::bench::kernels::{KernelConfig, WeightShape, DEFAULT_SHAPES};
use gguf_dequant::bench::{self, BenchAdapter, BenchConfig};
use gguf_dequant::gpu::kernels::Op;
use gguf_dequant::{DType, Format, GgufFile};

use crate::args::BenchArgs;
use crate::backend::{self, ADAPTERS};
use crate::progress::Progress;
use crate::render::{self, bench::Meta, svg};

/// Runs the benchmark and writes its table, JSON and chart; or, with `--compare`, merges reports.
pub fn run(args: &BenchArgs) -> Result<()> {
    if !args.compare.is_empty() {
        return compare(args);
    }
    let model = args.model.as_ref().map(GgufFile::open).transpose()?;
    let formats = match &model {
        Some(file) => model_formats(file, &args.types)?,
        None => formats(&args.types)?,
    };
    let dtypes = match args.dtype.trim().to_ascii_lowercase().as_str() {
        "both" => vec![DType::F32, DType::F16],
        "all" => DType::ALL.to_vec(),
        "none" => Vec::new(),
        one => vec![one.parse::<DType>().map_err(anyhow::Error::msg)?],
    };
    if !(args.mib > 0.0 && args.mib.is_finite()) {
        bail!("--mib must be a positive number of MiB");
    }
    let rotation_target = match args.rotate_mib {
        Some(m) if m > 0.0 && m.is_finite() => Some((m * (1u64 << 20) as f64).ceil() as u64),
        Some(_) => bail!("--rotate-mib must be a positive number of MiB"),
        None => None,
    };
    let budget = match args.budget {
        0.0 => None,
        b if b > 0.0 && b.is_finite() => Some(b),
        _ => bail!("--budget must be a positive number of seconds, or 0 for none"),
    };
    let kernels = kernels(args)?;
    if dtypes.is_empty() && kernels.ops.is_empty() {
        bail!("--dtype none without --kernels: nothing to measure");
    }
    kernels
        .validate(&formats)
        .map_err(|e| anyhow::anyhow!("--shape: {e}"))?;
    let json_stdout = args.json.as_deref() == Some(Path::new("-"));
    let backend = backend::choose(args.backend, ADAPTERS)?;
    let adapters = if formats.iter().any(|&f| f.has_shader()) {
        backend::open_each(backend, |a| {
            let mut options = super::variant_options(args.variant, args.precision);
            options.matvec.unroll = !args.no_unroll;
            if args.no_hw_f16 {
                options.matvec.hw_f16 = Some(false);
            }
            BenchAdapter::open(a, args.wall, options)
        })?
    } else {
        Vec::new()
    };
    let mut config = BenchConfig::new(formats, dtypes, args.mib);
    config.runs = args.runs as usize;
    config.cpu = !args.no_cpu;
    config.rotation_target = rotation_target;
    config.budget = budget;
    config.kernels = kernels;
    if let Some(file) = &model {
        config.blocks = bench::model_blocks(file, args.mib);
    }

    let bar = Progress::steps(args.quiet, json_stdout);
    let report = bench::run(&config, &adapters, &|s| bar.step(s.done, s.total, s.what))?;
    bar.finish();

    let mut json = render::bench::report(&report, &Meta::now());
    json.model = args.model.as_ref().map(|p| p.display().to_string());
    if let Some(path) = &args.svg {
        svg::write_svg(&[(String::new(), json.clone())], path)?;
    }
    match &args.json {
        Some(_) if json_stdout => return render::print_json(&serde_json::to_value(&json)?),
        Some(path) => {
            let text = serde_json::to_string_pretty(&json)?;
            std::fs::write(path, text + "\n")
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        }
        None => {}
    }
    let mut out = render::stdout();
    if let Some(p) = &args.model {
        writeln!(out, "blocks from {}", p.display())?;
    }
    render::bench::write_table(&report, &mut out)?;
    if let Some(path) = &args.svg {
        writeln!(out, "chart: {}", path.display())?;
    }
    out.flush()?;
    Ok(())
}

/// `--compare`: reads every report (one-line errors naming the file), prints the merged table and
/// draws the chart; runs nothing.
fn compare(args: &BenchArgs) -> Result<()> {
    let reports = args
        .compare
        .iter()
        .map(|p| Ok((p.display().to_string(), render::bench::read_report(p)?)))
        .collect::<Result<Vec<_>>>()?;
    if let Some(path) = &args.svg {
        svg::write_svg(&reports, path)?;
    }
    let mut out = render::stdout();
    render::bench::write_compare(&reports, &mut out)?;
    if let Some(path) = &args.svg {
        writeln!(out, "chart: {}", path.display())?;
    }
    out.flush()?;
    Ok(())
}

/// The formats of `file` that `--types` names (`all`: every one it holds, in registry order); a
/// named format the file does not hold is an error.
fn model_formats(file: &GgufFile, types: &str) -> Result<Vec<Format>> {
    let held: Vec<Format> = Format::ALL
        .iter()
        .copied()
        .filter(|&f| file.tensors().iter().any(|t| t.format == f))
        .collect();
    if types.trim().eq_ignore_ascii_case("all") {
        return Ok(held);
    }
    let named = formats(types)?;
    if let Some(f) = named.iter().find(|f| !held.contains(f)) {
        bail!("--types: {} holds no {f} tensor", file.path().display());
    }
    Ok(named)
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

/// `--kernels`, `--shape`, `--batch`, `--matmul-batch` and `--rows`.
fn kernels(args: &BenchArgs) -> Result<KernelConfig> {
    let mut config = KernelConfig {
        matvec_batches: args.batch.clone(),
        matmul_batch: args.matmul_batch,
        get_rows: args.rows,
        one_weight: args.one_weight,
        ..KernelConfig::default()
    };
    let mut seen = Vec::new();
    config.matvec_batches.retain(|b| {
        let new = !seen.contains(b);
        seen.push(*b);
        new
    });
    let Some(list) = &args.kernels else {
        return Ok(config);
    };
    if list.trim().eq_ignore_ascii_case("all") {
        config.ops = Op::ALL.to_vec();
    } else {
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match Op::from_name(name) {
                Some(k) if !config.ops.contains(&k) => config.ops.push(k),
                Some(_) => {}
                None => bail!(
                    "--kernels: unknown kernel `{name}` ({}, all)",
                    Op::ALL
                        .iter()
                        .map(|o| o.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        if config.ops.is_empty() {
            bail!("--kernels: no kernel given");
        }
    }
    if !args.shapes.is_empty() {
        config.shapes = Vec::new();
        for s in &args.shapes {
            let shape: WeightShape = s.parse().map_err(|e| anyhow::anyhow!("--shape: {e}"))?;
            if !config.shapes.contains(&shape) {
                config.shapes.push(shape);
            }
        }
    } else {
        config.shapes = DEFAULT_SHAPES.to_vec();
    }
    Ok(config)
}

//! One function per subcommand: parse nothing, call the library, print.

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Result};
use gguf_dequant::dequant::{self, Decoder, DequantSummary};
use gguf_dequant::gpu::loader::{
    self, LoadOptions, Progress, Residency, Selection, Source, WeightLoader,
};
use gguf_dequant::gpu::{self, GpuEngine, GpuError};
use gguf_dequant::output::OutputFormat;
use gguf_dequant::{inspect, selftest, verify, DType, Error, Format, GgufFile};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::args::{Backend, GpuBackend};

fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::new(io::stdout().lock())
}

fn print_json(value: &serde_json::Value) -> Result<()> {
    // Rendered first, so that a closed pipe surfaces as an io::Error when written.
    let text = serde_json::to_string_pretty(value)?;
    let mut out = stdout();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

/// A byte-count progress bar on stderr, drawn only when stdout is a terminal and not `hidden`.
fn progress_bar(total: u64, hidden: bool) -> ProgressBar {
    if hidden || !io::stdout().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar
}

fn describe(engine: &GpuEngine) -> String {
    let info = engine.adapter_info();
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

/// The environment variable that picks the backend when `--backend auto` is given.
const BACKEND_ENV: &str = "GGUF_DEQUANT_BACKEND";

/// The backend [`BACKEND_ENV`] names, if it is set and not empty.
fn env_backend() -> Result<Option<gpu::Backend>> {
    match std::env::var(BACKEND_ENV) {
        Ok(s) if !s.trim().is_empty() => match s.trim().parse() {
            Ok(b) => Ok(Some(b)),
            Err(_) => Err(Error::UnknownBackend(format!("{BACKEND_ENV}={s}")).into()),
        },
        _ => Ok(None),
    }
}

/// `backend`, or for `auto` the backend [`BACKEND_ENV`] names.
fn resolve(backend: gpu::Backend) -> Result<gpu::Backend> {
    match backend {
        gpu::Backend::Auto => Ok(env_backend()?.unwrap_or(gpu::Backend::Auto)),
        b => Ok(b),
    }
}

/// The engine of `backend` (a missing adapter is a typed error whose hint `main` prints).
fn engine(backend: GpuBackend) -> Result<GpuEngine> {
    Ok(GpuEngine::new(resolve(backend.gpu())?)?)
}

/// The engine for `backend`, or `None` for the CPU codecs. `auto` without any adapter falls back to
/// the CPU with a note (unless GGUF_DEQUANT_BACKEND names a backend); a named backend without an
/// adapter is an error.
fn decoder_engine(backend: Backend, announce: bool) -> Result<Option<GpuEngine>> {
    let Some(gpu_backend) = backend.gpu() else {
        return Ok(None);
    };
    match GpuEngine::new(resolve(gpu_backend)?) {
        Ok(engine) => {
            if announce {
                eprintln!("using {}", describe(&engine));
            }
            Ok(Some(engine))
        }
        Err(Error::Gpu(GpuError::NoAdapter { .. }))
            if backend == Backend::Auto && env_backend()?.is_none() =>
        {
            if announce {
                eprintln!("note: no GPU adapter found; decoding with the CPU codecs");
            }
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

fn note_fallback(summary: &DequantSummary) {
    if !summary.cpu_fallback.is_empty() {
        let names: Vec<&str> = summary.cpu_fallback.iter().map(|f| f.name()).collect();
        eprintln!(
            "note: {} ha{} no GPU shader; decoded by the CPU codecs",
            names.join(", "),
            if names.len() == 1 { "s" } else { "ve" }
        );
    }
}

fn backend_json(engine: Option<&GpuEngine>) -> (serde_json::Value, serde_json::Value) {
    match engine {
        Some(e) => {
            let info = e.adapter_info();
            (
                json!(info.backend.to_string().to_lowercase()),
                json!(info.name),
            )
        }
        None => (json!("cpu"), serde_json::Value::Null),
    }
}

/// `inspect`.
pub fn inspect(file: &Path, json: bool) -> Result<()> {
    let file = GgufFile::open(file)?;
    if json {
        return print_json(&inspect::to_json(&file));
    }
    let mut out = stdout();
    inspect::write_text(&file, &mut out)?;
    out.flush()?;
    Ok(())
}

/// `adapters`.
pub fn adapters(json: bool) -> Result<()> {
    let adapters = gpu::list_adapters();
    if json {
        let list: Vec<_> = adapters
            .iter()
            .map(|a| {
                json!({
                    "name": a.info.name,
                    "backend": a.info.backend.to_string().to_lowercase(),
                    "device_type": format!("{:?}", a.info.device_type),
                    "driver": a.info.driver,
                    "driver_info": a.info.driver_info,
                    "compute": a.compute,
                    "max_storage_buffer_binding_size": a.limits.max_storage_buffer_binding_size,
                    "max_buffer_size": a.limits.max_buffer_size,
                    "min_storage_buffer_offset_alignment": a.limits.min_storage_buffer_offset_alignment,
                    "max_compute_workgroups_per_dimension": a.limits.max_compute_workgroups_per_dimension,
                    "max_compute_workgroup_storage_size": a.limits.max_compute_workgroup_storage_size,
                })
            })
            .collect();
        return print_json(&json!({ "adapters": list }));
    }
    let mut out = stdout();
    if adapters.is_empty() {
        writeln!(
            out,
            "no GPU adapters found: {}",
            gguf_dequant::error::NO_ADAPTER_HINT
        )?;
    }
    for a in &adapters {
        let l = &a.limits;
        writeln!(
            out,
            "{} ({:?}, {:?})",
            a.info.name, a.info.backend, a.info.device_type
        )?;
        writeln!(
            out,
            "  driver:                {} {}",
            a.info.driver, a.info.driver_info
        )?;
        writeln!(
            out,
            "  compute shaders:       {}",
            if a.compute { "yes" } else { "no" }
        )?;
        writeln!(
            out,
            "  storage binding:       {} bytes",
            l.max_storage_buffer_binding_size
        )?;
        writeln!(out, "  buffer:                {} bytes", l.max_buffer_size)?;
        writeln!(
            out,
            "  offset alignment:      {} bytes",
            l.min_storage_buffer_offset_alignment
        )?;
        writeln!(
            out,
            "  workgroups per dim:    {}",
            l.max_compute_workgroups_per_dimension
        )?;
        writeln!(
            out,
            "  workgroup storage:     {} bytes",
            l.max_compute_workgroup_storage_size
        )?;
    }
    out.flush()?;
    Ok(())
}

/// `selftest`: exits with an error when anything differs.
pub fn selftest(backend: GpuBackend, json: bool) -> Result<()> {
    let cpu = selftest::run_cpu()?;
    let cpu_ok = cpu.iter().all(|(_, ok)| *ok);
    let engine = match GpuEngine::new(resolve(backend.gpu())?) {
        Ok(e) => Some(e),
        Err(e) => {
            if !json {
                match e.hint() {
                    Some(hint) => eprintln!("note: {e} (hint: {hint})"),
                    None => eprintln!("note: {e}"),
                }
                eprintln!("running the CPU codecs alone");
            }
            None
        }
    };
    let gpu = match &engine {
        Some(e) => selftest::run_gpu(e)?,
        None => Vec::new(),
    };
    let gpu_ok = gpu.iter().all(|s| s.ok());
    if json {
        let (backend, adapter) = backend_json(engine.as_ref());
        let formats: Vec<_> = gpu
            .iter()
            .map(|s| {
                json!({"type": s.format.name(), "n_values": s.f32.n_values,
                       "f32_mismatches": s.f32.mismatches, "f16_mismatches": s.f16.mismatches})
            })
            .collect();
        let cpu: Vec<_> = cpu
            .iter()
            .map(|(f, ok)| json!({"type": f.name(), "ok": ok}))
            .collect();
        print_json(
            &json!({"backend": backend, "adapter": adapter, "ok": cpu_ok && gpu_ok,
                           "gpu": formats, "cpu": cpu}),
        )?;
    } else {
        let mut out = stdout();
        if let Some(e) = &engine {
            writeln!(out, "adapter: {}", describe(e))?;
            writeln!(
                out,
                "{:<8} {:>6} {:>7}  {:<10} {:<10}",
                "type", "blocks", "values", "f32", "f16"
            )?;
            for s in &gpu {
                let verdict = |c: &verify::Comparison| {
                    if c.ok() {
                        "ok".to_string()
                    } else {
                        format!("{} differ", c.mismatches)
                    }
                };
                writeln!(
                    out,
                    "{:<8} {:>6} {:>7}  {:<10} {:<10}",
                    s.format.name(),
                    selftest::sample_len(s.format),
                    s.f32.n_values,
                    verdict(&s.f32),
                    verdict(&s.f16)
                )?;
            }
        }
        let bad: Vec<&str> = cpu
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(f, _)| f.name())
            .collect();
        if !bad.is_empty() {
            writeln!(
                out,
                "CPU codecs differ from their recorded output: {}",
                bad.join(", ")
            )?;
        }
        let cpu_only = Format::ALL.len() - gpu.len();
        match &engine {
            Some(e) if gpu_ok && cpu_ok => writeln!(
                out,
                "selftest passed: {} formats bit-identical on {} and the CPU codecs; \
                 the CPU codecs of all {} formats match their recorded output ({cpu_only} have no shader)",
                gpu.len(),
                describe(e),
                Format::ALL.len()
            )?,
            None if cpu_ok => writeln!(
                out,
                "selftest passed on the CPU only: the codecs of all {} formats match their recorded output",
                Format::ALL.len()
            )?,
            _ => {}
        }
        out.flush()?;
    }
    if !(cpu_ok && gpu_ok) {
        bail!("selftest failed");
    }
    Ok(())
}

/// `verify`: exits with an error when any tensor differs.
pub fn verify(
    file: &Path,
    backend: GpuBackend,
    dtype: DType,
    json: bool,
    quiet: bool,
) -> Result<()> {
    let path = file;
    let file = GgufFile::open(path)?;
    let engine = engine(backend)?;
    let total = file.tensors().iter().map(|t| t.n_bytes).sum();
    let bar = progress_bar(total, json || quiet);
    let checks = verify::verify_file(&file, &engine, dtype, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let bad = checks.iter().filter(|c| !c.comparison.ok()).count();
    if json {
        let (backend, adapter) = backend_json(Some(&engine));
        print_json(
            &json!({"file": path, "backend": backend, "adapter": adapter, "dtype": dtype.name(),
                           "ok": bad == 0, "tensors": checks}),
        )?;
    } else {
        let mut out = stdout();
        let width = checks
            .iter()
            .map(|c| c.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            out,
            "{:<width$}  {:<7} {:>10} {:>10} {:>12} {:>8}  decoded",
            "name", "type", "values", "mismatches", "max_abs_diff", "max_ulp"
        )?;
        for c in &checks {
            let m = &c.comparison;
            writeln!(
                out,
                "{:<width$}  {:<7} {:>10} {:>10} {:>12} {:>8}  {}",
                c.name,
                c.format.name(),
                m.n_values,
                m.mismatches,
                if m.max_abs_diff == 0.0 {
                    "0".to_string()
                } else {
                    format!("{:.3e}", m.max_abs_diff)
                },
                m.max_ulp,
                if c.gpu { "gpu" } else { "cpu only (no shader)" }
            )?;
        }
        let gpu = checks.iter().filter(|c| c.gpu).count();
        if bad == 0 {
            writeln!(
                out,
                "verify passed: {gpu} of {} tensors decoded on {} bit-identical to the CPU codecs ({dtype})",
                checks.len(),
                describe(&engine)
            )?;
        }
        out.flush()?;
    }
    if bad > 0 {
        bail!(
            "{bad} of {} tensors differ between the GPU and the CPU codecs",
            checks.len()
        );
    }
    Ok(())
}

/// `dequant` and `convert`: dequantise to a file, report on stderr or as JSON on stdout.
pub struct Dequant<'a> {
    /// The GGUF file.
    pub file: &'a Path,
    /// Tensors to write (all when empty).
    pub tensors: &'a [String],
    /// The output.
    pub out: &'a Path,
    /// Output dtype.
    pub dtype: DType,
    /// Where to decode.
    pub backend: Backend,
    /// Carry the GGUF metadata into the safetensors header.
    pub metadata: bool,
    /// Print a JSON summary on stdout.
    pub json: bool,
    /// No progress bar.
    pub quiet: bool,
}

impl Dequant<'_> {
    /// Runs it.
    pub fn run(&self) -> Result<()> {
        let file = GgufFile::open(self.file)?;
        let selected = dequant::select(&file, self.tensors)?;
        OutputFormat::from_path(self.out)?.check(self.out, selected.len(), self.dtype)?;
        let engine = decoder_engine(self.backend, !self.json)?;
        let decoder = engine.as_ref().map_or(Decoder::Cpu, Decoder::Gpu);
        let total: u64 = selected.iter().map(|t| t.n_bytes).sum();
        let bar = progress_bar(total, self.json || self.quiet);
        let metadata = self.metadata.then(|| {
            let mut m = inspect::metadata_strings(&file);
            // What Hugging Face tools look for in a safetensors header; no GGUF key is named so.
            m.entry("format".to_string())
                .or_insert_with(|| "pt".to_string());
            m
        });
        let start = Instant::now();
        let summary = dequant::dequant_file(
            &file,
            self.tensors,
            self.out,
            self.dtype,
            decoder,
            metadata,
            &|n| bar.inc(n),
        )?;
        bar.finish_and_clear();
        let secs = start.elapsed().as_secs_f64();
        let written = std::fs::metadata(self.out).map(|m| m.len()).unwrap_or(0);
        if self.json {
            let (backend, adapter) = backend_json(engine.as_ref());
            let fallback: Vec<&str> = summary.cpu_fallback.iter().map(|f| f.name()).collect();
            return print_json(&json!({
                "file": self.file, "out": self.out, "backend": backend, "adapter": adapter,
                "dtype": self.dtype.name(), "tensors": summary.tensors, "n_values": summary.values,
                "bytes_read": summary.bytes_read, "bytes_written": written, "seconds": secs,
                "cpu_fallback": fallback,
            }));
        }
        note_fallback(&summary);
        eprintln!(
            "wrote {} ({} tensor{}, {} values as {}, {written} bytes) in {secs:.2} s, {:.2} GB/s of quantised input",
            self.out.display(),
            summary.tensors,
            if summary.tensors == 1 { "" } else { "s" },
            summary.values,
            self.dtype,
            summary.bytes_read as f64 / secs / 1e9,
        );
        Ok(())
    }
}

/// `convert`: like `dequant` of every tensor, but the output must be `.safetensors`.
pub fn convert(
    file: &Path,
    out: &Path,
    dtype: DType,
    backend: Backend,
    json: bool,
    quiet: bool,
) -> Result<()> {
    if OutputFormat::from_path(out).ok() != Some(OutputFormat::Safetensors) {
        bail!(
            "{}: convert writes .safetensors (use `dequant` for .npy or .bin)",
            out.display()
        );
    }
    Dequant {
        file,
        tensors: &[],
        out,
        dtype,
        backend,
        metadata: true,
        json,
        quiet,
    }
    .run()
}

/// `load`'s arguments.
pub struct Load<'a> {
    /// The GGUF file.
    pub file: &'a Path,
    /// Raw or dequantised.
    pub residency: Residency,
    /// GPU backend.
    pub backend: GpuBackend,
    /// Tensor names (all when both lists are empty).
    pub tensors: Vec<String>,
    /// Name globs.
    pub globs: Vec<String>,
    /// Memory map or plain reads.
    pub source: Source,
    /// Host staging budget.
    pub staging_bytes: u64,
    /// Print JSON.
    pub json: bool,
    /// No progress bar.
    pub quiet: bool,
}

/// `load`: the selected tensors made GPU-resident; a report of speed and memory.
pub fn load(args: Load<'_>) -> Result<()> {
    let file = GgufFile::open(args.file)?;
    let selection = if !args.tensors.is_empty() {
        Selection::Names(args.tensors)
    } else if !args.globs.is_empty() {
        Selection::Glob(args.globs)
    } else {
        Selection::All
    };
    let total = selection
        .resolve(&file)?
        .iter()
        .map(|&i| file.tensors()[i].n_bytes)
        .sum();
    let engine = std::sync::Arc::new(engine(args.backend)?);
    let bar = progress_bar(total, args.json || args.quiet);
    let tick = bar.clone();
    let options = LoadOptions {
        staging_bytes: args.staging_bytes,
        source: args.source,
        progress: Some(Progress::new(move |n| tick.inc(n))),
        ..LoadOptions::default()
    };
    let loader = WeightLoader::with_engine(engine.clone(), options);
    let model = loader.load(&file, &selection, args.residency)?;
    bar.finish_and_clear();
    let r = model.report();
    let dtype = match args.residency {
        Residency::Raw => "raw",
        Residency::Dequantised(d) => d.name(),
    };
    let peak_rss = loader::peak_rss_bytes();
    if args.json {
        let (backend, adapter) = backend_json(Some(&engine));
        return print_json(&json!({
            "file": args.file, "backend": backend, "adapter": adapter, "dtype": dtype,
            "tensors": r.tensors, "bytes_read": r.bytes_read, "bytes_resident": r.bytes_resident,
            "seconds": r.seconds, "gb_per_s": r.gb_per_s(), "peak_rss_bytes": peak_rss,
            "source": r.source.name(), "staging_bytes": r.staging_bytes,
        }));
    }
    let mut out = stdout();
    writeln!(out, "adapter:        {}", describe(&engine))?;
    writeln!(out, "tensors:        {} resident as {dtype}", r.tensors)?;
    writeln!(
        out,
        "bytes read:     {} ({}, {} bytes of staging)",
        r.bytes_read,
        r.source.name(),
        r.staging_bytes
    )?;
    writeln!(out, "bytes resident: {}", r.bytes_resident)?;
    writeln!(out, "seconds:        {:.3}", r.seconds)?;
    writeln!(out, "speed:          {:.2} GB/s read", r.gb_per_s())?;
    match peak_rss {
        Some(b) => writeln!(
            out,
            "peak host RSS:  {b} bytes ({:.0} MiB)",
            b as f64 / 1048576.0
        )?,
        None => writeln!(out, "peak host RSS:  unknown on this system")?,
    }
    out.flush()?;
    Ok(())
}

/// `bench`: GPU dequantisation throughput per adapter × format × dtype, next to a buffer copy of
/// the same traffic and the CPU codecs. The table goes to stdout (or the JSON with `--json -`),
/// progress to stderr when it is a terminal.
pub fn bench(args: &crate::args::BenchArgs) -> Result<()> {
    use gguf_dequant::bench::{self, BenchAdapter, BenchConfig};

    let formats = if args.types.trim().eq_ignore_ascii_case("all") {
        bench::gpu_formats()
    } else {
        let mut formats = Vec::new();
        for name in args
            .types
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match Format::from_name(name) {
                Some(f) if !formats.contains(&f) => formats.push(f),
                Some(_) => {}
                None => bail!("--types: unknown ggml type `{name}`"),
            }
        }
        if formats.is_empty() {
            bail!("--types: no type given");
        }
        formats
    };
    let dtypes = match args.dtype.trim().to_ascii_lowercase().as_str() {
        "both" => vec![DType::F32, DType::F16],
        "all" => DType::ALL.to_vec(),
        one => vec![one.parse::<DType>().map_err(anyhow::Error::msg)?],
    };
    if !(args.mib > 0.0 && args.mib.is_finite()) {
        bail!("--mib must be a positive number of MiB");
    }
    let json_stdout = args.json.as_deref() == Some(Path::new("-"));
    let (backend, all) = args.backend.gpu();
    let backend = if all { backend } else { resolve(backend)? };
    let gpu_wanted = formats.iter().any(|&f| f.has_shader());
    let adapters = if gpu_wanted {
        BenchAdapter::open(backend, all, args.wall)?
    } else {
        Vec::new()
    };
    let mut config = BenchConfig::new(formats, dtypes, args.mib);
    config.runs = args.runs as usize;
    config.cpu = !args.no_cpu;

    let hidden = args.quiet || json_stdout || !io::stderr().is_terminal();
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
        ) {
            bar.set_style(style);
        }
        bar
    };
    let report = bench::run(&config, &adapters, &|s| {
        bar.set_length(s.total);
        bar.set_position(s.done);
        bar.set_message(s.what.to_string());
    })?;
    bar.finish_and_clear();

    if let Some(path) = &args.svg {
        report.write_svg(path)?;
    }
    let value = report.to_json();
    match &args.json {
        Some(_) if json_stdout => return print_json(&value),
        Some(path) => {
            let text = serde_json::to_string_pretty(&value)?;
            std::fs::write(path, text + "\n")
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        }
        None => {}
    }
    let mut out = stdout();
    report.write_table(&mut out)?;
    if let Some(path) = &args.svg {
        writeln!(out, "chart: {}", path.display())?;
    }
    out.flush()?;
    Ok(())
}

//! `dequant` and `convert`: tensors decoded into a file; a summary on stderr, or JSON on stdout.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Result};
use gguf_dequant::dequant::{self, Decoder, DequantSummary};
use gguf_dequant::gpu::{GpuEngine, GpuError};
use gguf_dequant::output::OutputFormat;
use gguf_dequant::Selection;
use gguf_dequant::{Backend, DType, Error, GgufFile};
use serde_json::json;

use crate::args::{ConvertArgs, DequantArgs, Report};
use crate::backend::{self, DECODE};
use crate::progress::Progress;
use crate::render::{self, describe};

/// `dequant`: the selected tensors (all by default) to `.safetensors`, `.npy` or `.bin`.
pub fn dequant(args: DequantArgs) -> Result<()> {
    Job {
        file: &args.file,
        selection: args.select.selection(),
        out: &args.out,
        dtype: args.dtype,
        backend: args.backend,
        metadata: false,
        report: &args.report,
    }
    .run()
}

/// `convert`: like `dequant`, with the GGUF metadata in the header; the output must be
/// `.safetensors`.
pub fn convert(args: ConvertArgs) -> Result<()> {
    if OutputFormat::from_path(&args.out).ok() != Some(OutputFormat::Safetensors) {
        bail!(
            "{}: convert writes .safetensors (use `dequant` for .npy or .bin)",
            args.out.display()
        );
    }
    Job {
        file: &args.file,
        selection: args.select.selection(),
        out: &args.out,
        dtype: args.dtype,
        backend: args.backend,
        metadata: true,
        report: &args.report,
    }
    .run()
}

/// What `dequant` and `convert` share.
struct Job<'a> {
    file: &'a Path,
    selection: Selection,
    out: &'a Path,
    dtype: DType,
    backend: Option<Backend>,
    /// Carry the GGUF metadata into the safetensors header.
    metadata: bool,
    report: &'a Report,
}

impl Job<'_> {
    fn run(&self) -> Result<()> {
        let json = self.report.json;
        let backend = backend::choose(self.backend, DECODE)?;
        let file = GgufFile::open(self.file)?;
        let tensors = super::selected(&file, &self.selection)?;
        // Refusals (the input itself, a wrong extension or count) before any adapter is opened.
        dequant::check(&file, tensors.len(), self.out, self.dtype)?;
        let engine = decoder_engine(backend, !json)?;
        let decoder = engine.as_ref().map_or(Decoder::Cpu, Decoder::Gpu);
        let total = tensors.iter().map(|t| t.n_bytes).sum();
        let bar = Progress::bytes(total, self.report.quiet, json);
        let metadata = self.metadata.then(|| dequant::safetensors_metadata(&file));
        let start = Instant::now();
        let summary = dequant::dequant_file(
            &file,
            &tensors,
            self.out,
            self.dtype,
            decoder,
            metadata,
            &|n| bar.inc(n),
        )?;
        bar.finish();
        let secs = start.elapsed().as_secs_f64();
        let written = std::fs::metadata(self.out).map(|m| m.len()).unwrap_or(0);
        if json {
            let (backend, adapter) = render::backend_json(engine.as_ref());
            let fallback: Vec<&str> = summary.cpu_fallback.iter().map(|f| f.name()).collect();
            return render::print_json(&json!({
                "file": render::path_json(self.file), "out": render::path_json(self.out),
                "backend": backend, "adapter": adapter, "dtype": self.dtype.name(),
                "tensors": summary.tensors, "n_values": summary.values,
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

/// The engine for `backend`, or `None` for the CPU codecs. `auto` without any adapter falls back to
/// the CPU with a note; a named backend without an adapter is an error.
fn decoder_engine(backend: Backend, announce: bool) -> Result<Option<GpuEngine>> {
    if backend == Backend::Cpu {
        return Ok(None);
    }
    match GpuEngine::new(backend) {
        Ok(engine) => {
            if announce {
                eprintln!("using {}", describe(&engine));
            }
            Ok(Some(engine))
        }
        Err(Error::Gpu(GpuError::NoAdapter { .. })) if backend == Backend::Auto => {
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

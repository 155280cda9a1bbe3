//! `load`: the selected tensors made GPU-resident, with a report of speed and memory.

use std::io::Write;
use std::sync::Arc;

use anyhow::Result;
use gguf_dequant::gpu::loader::{self, LoadOptions, Progress as Ticks, Residency, WeightLoader};
use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::GgufFile;
use serde_json::json;

use crate::args::LoadArgs;
use crate::backend::{self, GPU};
use crate::progress::Progress;
use crate::render::{self, describe};

/// Loads `args.file` (or its selection) and reports.
pub fn run(args: LoadArgs) -> Result<()> {
    let backend = backend::choose(args.backend, GPU)?;
    let file = GgufFile::open(&args.file)?;
    let selection = args.select.selection();
    let total = super::selected(&file, &selection)?
        .iter()
        .map(|t| t.n_bytes)
        .sum();
    let engine = Arc::new(GpuEngine::new(backend)?);
    let bar = Progress::bytes(total, args.report.quiet, args.report.json);
    let options = LoadOptions {
        staging_bytes: args.staging_mib << 20,
        source: args.source,
        progress: Some(Ticks::new(bar.ticker())),
        ..LoadOptions::default()
    };
    let loader = WeightLoader::with_engine(engine.clone(), options);
    let model = loader.load(&file, &selection, args.dtype)?;
    bar.finish();
    let r = model.report();
    let dtype = match args.dtype {
        Residency::Raw => "raw",
        Residency::Dequantised(d) => d.name(),
    };
    let peak_rss = loader::peak_rss_bytes();
    if args.report.json {
        let (backend, adapter) = render::backend_json(Some(&engine));
        return render::print_json(&json!({
            "file": render::path_json(&args.file), "backend": backend, "adapter": adapter,
            "dtype": dtype, "tensors": r.tensors, "bytes_read": r.bytes_read,
            "bytes_resident": r.bytes_resident, "seconds": r.seconds, "gb_per_s": r.gb_per_s(),
            "peak_rss_bytes": peak_rss, "source": r.source.name(),
            "staging_bytes": r.staging_bytes,
        }));
    }
    let mut out = render::stdout();
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

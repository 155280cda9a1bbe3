//! `load`: the selected tensors made GPU-resident, with a report of speed and memory.

use std::io::Write;
use std::sync::Arc;

use anyhow::bail;
use anyhow::Result;
use gguf_dequant::gpu::loader::{
    self, LoadOptions, LoadRooflines, Progress as Ticks, Residency, RooflineOptions, Source,
    WeightLoader,
};
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
    let created = std::time::Instant::now();
    let engine = Arc::new(GpuEngine::new(backend)?);
    let device_seconds = created.elapsed().as_secs_f64();
    let bar = Progress::bytes(total, args.report.quiet, args.report.json);
    let options = LoadOptions {
        staging_bytes: args.staging_mib << 20,
        source: args.source,
        slots: args.slots as usize,
        readers: args.readers as usize,
        progress: Some(Ticks::new(bar.ticker())),
        ..LoadOptions::default()
    };
    let loader = WeightLoader::with_engine(engine.clone(), options);
    if args.cold {
        if let Err(why) = loader::drop_page_cache(&file) {
            bail!("cannot load from the disk: {why}");
        }
    }
    let model = loader.load(&file, &selection, args.dtype)?;
    bar.finish();
    let r = model.report().clone();
    let peak_rss = loader::peak_rss_bytes();
    // Measured right after the load, in the same machine state, once the model is gone: the
    // device has room again, the peak memory stays the load's, and what the load freed can only
    // make the rooflines faster, never the load (measured first, their freed memory would speed
    // up the load on a CPU adapter, whose fresh device memory costs page faults).
    drop(model);
    let rooflines = if args.no_roofline {
        None
    } else {
        Some(loader.measure_rooflines(&file, &RooflineOptions::default())?)
    };
    // O_DIRECT reads from the disk whatever the page cache holds.
    let from_disk = args.cold || r.source == Source::Direct;
    let fraction = rooflines.as_ref().and_then(|f| f.fraction(&r, from_disk));
    let dtype = match args.dtype {
        Residency::Raw => "raw",
        Residency::Dequantised(d) => d.name(),
    };
    if args.report.json {
        let (backend, adapter) = render::backend_json(Some(&engine));
        return render::print_json(&json!({
            "file": render::path_json(&args.file), "backend": backend, "adapter": adapter,
            "dtype": dtype, "tensors": r.tensors, "bytes_read": r.bytes_read,
            "bytes_resident": r.bytes_resident, "seconds": r.seconds, "gb_per_s": r.gb_per_s(),
            "peak_rss_bytes": peak_rss, "source": r.source.name(),
            "staging_bytes": r.staging_bytes,
            "device_seconds": device_seconds, "setup_seconds": r.setup_seconds,
            "transfer_seconds": r.transfer_seconds, "transfer_gb_per_s": r.transfer_gb_per_s(),
            "readers": r.readers, "chunks": r.chunks, "cold": args.cold,
            "rooflines": rooflines.as_ref().map(|f| rooflines_json(f, from_disk)),
            "fraction": fraction,
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
    writeln!(
        out,
        "device:         {device_seconds:.3} s creating the device (not in seconds)"
    )?;
    writeln!(
        out,
        "setup:          {:.3} s planning, compiling shaders, allocating",
        r.setup_seconds
    )?;
    writeln!(
        out,
        "transfer:       {:.3} s, {:.2} GB/s ({} readers, {} chunks{})",
        r.transfer_seconds,
        r.transfer_gb_per_s(),
        r.readers,
        r.chunks,
        if from_disk { ", from the disk" } else { "" }
    )?;
    match &rooflines {
        Some(f) => {
            writeln!(
                out,
                "read warm:      {:.2} GB/s (page cache, {} bytes)",
                f.read_warm.gb_per_s(),
                f.read_warm.bytes
            )?;
            match &f.read_cold {
                Ok(t) => writeln!(
                    out,
                    "read cold:      {:.2} GB/s (disk, {} bytes)",
                    t.gb_per_s(),
                    t.bytes
                )?,
                Err(why) => writeln!(out, "read cold:      not measured: {why}")?,
            }
            writeln!(
                out,
                "host to device: {:.2} GB/s ({} bytes through the staging ring into new buffers; {:.2} GB/s again into the same)",
                f.h2d.gb_per_s(),
                f.h2d.bytes,
                f.h2d_reused.gb_per_s()
            )?;
            match (fraction, f.bound_gb_per_s(from_disk)) {
                (Some(x), Some(b)) => writeln!(
                    out,
                    "fraction:       {x:.2} of {b:.2} GB/s (transfer / the smaller of read {} and host to device)",
                    if from_disk { "cold" } else { "warm" }
                )?,
                _ => writeln!(out, "fraction:       not measured (no cold read figure)")?,
            }
        }
        None => writeln!(out, "rooflines:      not measured (--no-roofline)")?,
    }
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

/// The `"rooflines"` object of `load --json`.
fn rooflines_json(f: &LoadRooflines, cold: bool) -> serde_json::Value {
    json!({
        "read_warm_gb_per_s": f.read_warm.gb_per_s(),
        "read_warm_bytes": f.read_warm.bytes,
        "read_cold_gb_per_s": f.read_cold.as_ref().ok().map(|t| t.gb_per_s()),
        "read_cold_not_measured": f.read_cold.as_ref().err().map(|why| why.to_string()),
        "h2d_gb_per_s": f.h2d.gb_per_s(),
        "h2d_bytes": f.h2d.bytes,
        "h2d_reused_gb_per_s": f.h2d_reused.gb_per_s(),
        "bound_gb_per_s": f.bound_gb_per_s(cold),
    })
}

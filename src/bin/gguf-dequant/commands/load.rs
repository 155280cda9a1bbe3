//! `load`: the selected tensors made GPU-resident, with a report of speed and memory and the
//! rooflines of the same run (the files' read speed, the adapter's host-to-device speed); with
//! `--devices`, one model placed over several adapters.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use gguf_dequant::gpu::kernels::{TuneReport, TuneSource};
use gguf_dequant::gpu::loader::{
    self, LoadOptions, LoadReport, LoadRooflines, MultiLoader, MultiModel, Placement,
    Progress as Ticks, Residency, RooflineOptions, Source, Split, WeightLoader,
};
use gguf_dequant::gpu::{self, EngineOptions, GpuEngine};
use gguf_dequant::{Backend, GgufFile};
use serde_json::json;

use crate::args::{DeviceArgs, Devices, LoadArgs};
use crate::backend::{self, GPU};
use crate::progress::Progress;
use crate::render::{self, describe};

/// Loads `args.file` (or its selection) and reports.
pub fn run(args: LoadArgs) -> Result<()> {
    if let Some(devices) = &args.devices.devices {
        return run_on_devices(&args, devices);
    }
    let backend = backend::choose(args.backend, GPU)?;
    let file = GgufFile::open(&args.file)?;
    let selection = args.select.clone().selection();
    let total = super::selected(&file, &selection)?
        .iter()
        .map(|t| t.n_bytes)
        .sum();
    let created = Instant::now();
    let engine = Arc::new(GpuEngine::new(backend)?);
    let device_seconds = created.elapsed().as_secs_f64();
    let bar = Progress::bytes(total, args.report.quiet, args.report.json);
    let loader = WeightLoader::with_engine(engine.clone(), options(&args, &bar));
    cold(&args, &file)?;
    let model = loader.load(&file, &selection, args.dtype)?;
    bar.finish();
    let r = model.report().clone();
    let tuning = model.tuning().cloned();
    let peak_rss = gguf_dequant::sys::peak_rss_bytes();
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
    let figures = Figures {
        device_seconds,
        peak_rss,
        rooflines,
        // O_DIRECT reads from the disk whatever the page cache holds.
        from_disk: args.cold || r.source == Source::Direct,
        tuning,
    };
    print(&args, &r, On::Adapter(&engine), &figures)
}

/// What the tuner did after the load, as JSON.
fn tuning_json(t: &TuneReport) -> serde_json::Value {
    let count = |s: TuneSource| t.rows.iter().filter(|r| r.source == s).count();
    json!({
        "mode": t.tuning.name(), "keys": t.rows.len(), "measured": count(TuneSource::Measured),
        "cached": count(TuneSource::Cache), "seconds": t.seconds,
        "cache": t.cache.as_ref().map(|p| p.display().to_string()), "warnings": t.warnings,
    })
}

/// What the tuner did after the load, in one line.
fn tuning_line(t: &TuneReport) -> String {
    let count = |s: TuneSource| t.rows.iter().filter(|r| r.source == s).count();
    format!(
        "matvec tuned ({}): {} keys, {} measured, {} from the cache, {:.2} s{}{}",
        t.tuning,
        t.rows.len(),
        count(TuneSource::Measured),
        count(TuneSource::Cache),
        t.seconds,
        t.cache
            .as_ref()
            .map(|p| format!("; cache {}", p.display()))
            .unwrap_or_default(),
        t.warnings
            .iter()
            .map(|w| format!("; warning: {w}"))
            .collect::<String>()
    )
}

/// `--cold`: the files' pages dropped from the page cache first.
fn cold(args: &LoadArgs, file: &GgufFile) -> Result<()> {
    if args.cold {
        if let Err(why) = loader::drop_page_cache(file) {
            bail!("cannot load from the disk: {why}");
        }
    }
    Ok(())
}

/// The loader options of the command line (staging, slots, readers, source, the progress bar).
fn options(args: &LoadArgs, bar: &Progress) -> LoadOptions {
    LoadOptions {
        staging_bytes: args.staging_mib << 20,
        source: args.source,
        slots: args.slots as usize,
        readers: args.readers as usize,
        progress: Some(Ticks::new(bar.ticker())),
        ..LoadOptions::default()
    }
}

/// What the report gives beside the load's own figures.
struct Figures {
    /// Seconds creating the device(s).
    device_seconds: f64,
    peak_rss: Option<u64>,
    /// `None`: not measured (`--no-roofline`, or several devices).
    rooflines: Option<LoadRooflines>,
    /// Whether the load read from the disk (`--cold`, O_DIRECT).
    from_disk: bool,
    /// What the tuner did after the load (`None`: off, or several devices).
    tuning: Option<TuneReport>,
}

/// `--devices`: the placement is checked before any device is created, then every device loads
/// its share at once.
fn run_on_devices(args: &LoadArgs, devices: &Devices) -> Result<()> {
    let file = GgufFile::open(&args.file)?;
    let selection = args.select.clone().selection();
    let adapters = gpu::compute_adapters(Backend::All)?;
    let numbers = adapter_numbers(devices, adapters.len())?;
    let placement = placement(&args.devices, &numbers)?;
    let total = placement
        .assign(&file, &selection, args.dtype)?
        .iter()
        .flatten()
        .map(|&i| file.tensors()[i].n_bytes)
        .sum();
    let picked: Vec<_> = numbers.iter().map(|&i| adapters[i].clone()).collect();
    let bar = Progress::bytes(total, args.report.quiet, args.report.json);
    let created = Instant::now();
    let multi = MultiLoader::from_adapters(&picked, EngineOptions::default(), options(args, &bar))?;
    let device_seconds = created.elapsed().as_secs_f64();
    cold(args, &file)?;
    let model = multi.load(&file, &selection, args.dtype, &placement)?;
    bar.finish();
    let r = model.report();
    let loads: Vec<&LoadReport> = r.devices.iter().filter_map(|d| d.load.as_ref()).collect();
    let longest = |f: fn(&LoadReport) -> f64| loads.iter().map(|l| f(l)).fold(0.0, f64::max);
    let totals = LoadReport {
        tensors: r.tensors,
        bytes_read: r.bytes_read,
        bytes_resident: r.bytes_resident,
        seconds: r.seconds,
        source: args.source,
        staging_bytes: r.staging_bytes,
        chunks: loads.iter().map(|l| l.chunks).sum(),
        setup_seconds: longest(|l| l.setup_seconds),
        transfer_seconds: longest(|l| l.transfer_seconds),
        readers: loads.iter().map(|l| l.readers).sum(),
    };
    let figures = Figures {
        device_seconds,
        peak_rss: gguf_dequant::sys::peak_rss_bytes(),
        rooflines: None,
        from_disk: args.cold || args.source == Source::Direct,
        tuning: None,
    };
    print(
        args,
        &totals,
        On::Devices {
            model: &model,
            first: multi.loaders()[0].engine(),
            numbers: &numbers,
            placement: &placement,
        },
        &figures,
    )
}
/// The adapter numbers `--devices` names, each a compute adapter, none twice.
fn adapter_numbers(devices: &Devices, found: usize) -> Result<Vec<usize>> {
    let list = match devices {
        Devices::All => (0..found).collect(),
        Devices::List(list) => list.clone(),
    };
    for (i, &d) in list.iter().enumerate() {
        if d >= found {
            bail!("--devices: there is no compute adapter {d} ({found} found, numbered by `gguf-dequant adapters`)");
        }
        if list[..i].contains(&d) {
            bail!("--devices: adapter {d} is named twice");
        }
    }
    Ok(list)
}

/// The placement of `--tensor-split` / `--budget-mib` and `--input-device` / `--output-device`
/// over the adapters `numbers` (in that order).
fn placement(args: &DeviceArgs, numbers: &[usize]) -> Result<Placement> {
    let n = numbers.len();
    let given = |flag: &str, len: usize| {
        if len == n {
            Ok(())
        } else {
            Err(anyhow!(
                "{flag} gives {len} value(s) for the {n} device(s) of --devices"
            ))
        }
    };
    let split = if !args.budget_mib.is_empty() {
        given("--budget-mib", args.budget_mib.len())?;
        Split::Budgets(
            args.budget_mib
                .iter()
                .map(|m| m.saturating_mul(1 << 20))
                .collect(),
        )
    } else if !args.tensor_split.is_empty() {
        given("--tensor-split", args.tensor_split.len())?;
        Split::Proportions(args.tensor_split.clone())
    } else {
        Split::Proportions(vec![1.0; n])
    };
    let position = |flag: &str, adapter: Option<usize>, default: usize| match adapter {
        None => Ok(default),
        Some(a) => numbers
            .iter()
            .position(|&d| d == a)
            .ok_or_else(|| anyhow!("{flag}: adapter {a} is not one of --devices")),
    };
    Ok(Placement {
        split,
        input: position("--input-device", args.input_device, 0)?,
        output: position("--output-device", args.output_device, n - 1)?,
    })
}

/// Where the model went: one adapter, or several devices.
enum On<'a> {
    Adapter(&'a GpuEngine),
    Devices {
        model: &'a MultiModel,
        /// The engine of the first device (the `backend` and `adapter` of the JSON report).
        first: &'a GpuEngine,
        /// The adapter number of each device.
        numbers: &'a [usize],
        placement: &'a Placement,
    },
}

/// Prints the report `r` (of the whole load) as text or JSON.
fn print(args: &LoadArgs, r: &LoadReport, on: On<'_>, figures: &Figures) -> Result<()> {
    let dtype = match args.dtype {
        Residency::Raw => "raw",
        Residency::Dequantised(d) => d.name(),
    };
    let Figures {
        device_seconds,
        peak_rss,
        rooflines,
        from_disk,
        tuning,
    } = figures;
    let (from_disk, device_seconds) = (*from_disk, *device_seconds);
    let fraction = rooflines.as_ref().and_then(|f| f.fraction(r, from_disk));
    if args.report.json {
        let first = match &on {
            On::Adapter(engine) | On::Devices { first: engine, .. } => engine,
        };
        let (backend, adapter) = render::backend_json(Some(first));
        let mut report = json!({
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
            "tuning": tuning.as_ref().map(tuning_json),
        });
        if let On::Devices { model, numbers, .. } = &on {
            let devices: Vec<_> = model
                .report()
                .devices
                .iter()
                .zip(numbers.iter())
                .map(|(d, index)| {
                    json!({
                        "index": index, "adapter": d.adapter.name,
                        "backend": d.adapter.backend.to_string().to_lowercase(),
                        "tensors": d.tensors, "layers": d.layers,
                        "bytes_resident": d.bytes_resident,
                    })
                })
                .collect();
            report["devices"] = json!(devices);
        }
        return render::print_json(&report);
    }
    let mut out = render::stdout();
    match &on {
        On::Adapter(engine) => writeln!(out, "adapter:        {}", describe(engine))?,
        On::Devices {
            model,
            numbers,
            placement,
            ..
        } => {
            let split = match &placement.split {
                Split::Proportions(p) => format!("layers by shares {} of their count", list(p)),
                Split::Budgets(b) => format!(
                    "layers by budgets of {} MiB",
                    list(&b.iter().map(|b| b >> 20).collect::<Vec<_>>())
                ),
            };
            writeln!(out, "devices:        {}, {split}", numbers.len())?;
            for (d, index) in model.report().devices.iter().zip(numbers.iter()) {
                let info = &d.adapter;
                let mut roles = String::new();
                for (role, at) in [("input", placement.input), ("output", placement.output)] {
                    if at == d.device {
                        roles.push_str(", ");
                        roles.push_str(role);
                    }
                }
                writeln!(
                    out,
                    "  [{index}] {} ({:?}, {:?}): layers {}, {} tensors, {} bytes resident{roles}",
                    info.name,
                    info.backend,
                    info.device_type,
                    ranges(&d.layers),
                    d.tensors,
                    d.bytes_resident
                )?;
            }
        }
    }
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
    if let Some(t) = tuning {
        writeln!(out, "tuning:         {}", tuning_line(t))?;
    }
    writeln!(out, "speed:          {:.2} GB/s read", r.gb_per_s())?;
    let devices = if matches!(on, On::Devices { .. }) {
        "devices"
    } else {
        "device"
    };
    writeln!(
        out,
        "device:         {device_seconds:.3} s creating the {devices} (not in seconds)"
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
        None if args.no_roofline => writeln!(out, "rooflines:      not measured (--no-roofline)")?,
        None => writeln!(out, "rooflines:      not measured with --devices")?,
    }
    match *peak_rss {
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

/// `3,1,1`.
fn list<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Sorted layer numbers as runs: `0-9,12`, or `none`.
fn ranges(layers: &[u64]) -> String {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &l in layers {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == l => *end = l,
            _ => runs.push((l, l)),
        }
    }
    if runs.is_empty() {
        return "none".into();
    }
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

//! `tune`: a model's matrices made resident (raw blocks), then matvec tuned on the adapter for
//! every key the model uses ([`GpuEngine::tune_matvec`]), with one line (or JSON row) per key.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use gguf_dequant::gpu::kernels::{TuneReport, TuneSettings};
use gguf_dequant::gpu::loader::{LoadOptions, Residency, WeightLoader};
use gguf_dequant::gpu::tune::Tuning;
use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::GgufFile;
use serde_json::json;

use crate::args::TuneArgs;
use crate::backend::{self, GPU};

/// Loads `args.file`'s matrices and tunes matvec for them.
pub fn run(args: &TuneArgs) -> Result<()> {
    let backend = backend::choose(args.backend, GPU)?;
    let tuning = match args.tune {
        Some(t) => t,
        None => Tuning::from_env()?.unwrap_or(Tuning::On),
    };
    let file = GgufFile::open(&args.file)?;
    let engine = Arc::new(GpuEngine::new(backend)?);
    let loader = WeightLoader::with_engine(engine.clone(), LoadOptions::default());
    let model = loader.load(&file, &args.select.clone().selection(), Residency::Raw)?;
    // The matrices: tensors of two dims or more whose format has a shader.
    let tensors: Vec<_> = model
        .tensors()
        .iter()
        .filter(|t| t.dims.len() >= 2 && t.format.has_shader())
        .collect();
    let mut settings = TuneSettings::new(tuning);
    settings.total_budget = Duration::from_millis(args.budget_ms);
    settings.rules.key_budget = Duration::from_millis(args.key_budget_ms);
    let report = engine.tune_matvec(&tensors, &args.batch, &settings)?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if args.report.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&engine, &report))?
        );
    } else {
        print(&engine, &report);
    }
    Ok(())
}

/// The report as one JSON object.
fn to_json(engine: &GpuEngine, r: &TuneReport) -> serde_json::Value {
    let info = engine.adapter_info();
    json!({
        "adapter": info.name,
        "backend": info.backend.to_string().to_lowercase(),
        "tuning": r.tuning.name(),
        "cache": r.cache.as_ref().map(|p| p.display().to_string()),
        "seconds": r.seconds,
        "warnings": r.warnings,
        "keys": r.rows.iter().map(|row| json!({
            "key": row.key.to_string(),
            "variant": row.mapping.to_string(),
            "source": row.source.name(),
            "median_us": row.median_us,
            "roofline_frac": row.roofline_frac,
            "runner_up": row.runner_up.as_ref().map(|(v, us)| json!({"variant": v, "median_us": us})),
            "disqualified": row.disqualified.iter().map(|(v, why)| json!({"variant": v, "why": why})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The report as a table.
fn print(engine: &GpuEngine, r: &TuneReport) {
    let info = engine.adapter_info();
    println!(
        "{} ({}), tuning {}, {:.2} s{}",
        info.name,
        info.backend.to_string().to_lowercase(),
        r.tuning,
        r.seconds,
        r.cache
            .as_ref()
            .map(|p| format!(", cache {}", p.display()))
            .unwrap_or_default()
    );
    println!(
        "{:<34} {:<14} {:<9} {:>10} {:>9}  runner-up",
        "key", "variant", "source", "µs", "roofline"
    );
    for row in &r.rows {
        let us = row.median_us.map_or("-".into(), |v| format!("{v:.2}"));
        let frac = row
            .roofline_frac
            .map_or("-".into(), |f| format!("{:.0} %", f * 100.0));
        let runner = row
            .runner_up
            .as_ref()
            .map_or("-".into(), |(v, us)| format!("{v} {us:.2} µs"));
        println!(
            "{:<34} {:<14} {:<9} {:>10} {:>9}  {runner}",
            row.key.to_string(),
            row.mapping.to_string(),
            row.source.name(),
            us,
            frac
        );
        for (v, why) in &row.disqualified {
            println!("    disqualified {v}: {why}");
        }
    }
}

//! Real quantiser output: `blk.0.ffn_down.weight` of SmolLM2 quantised by llama.cpp's own C
//! (`ggml_quantize_chunk`, `quantize_row_q8_K_ref`, `quantize_row_q8_1_ref`) into the 16 super-block
//! formats and the small-block ones, by `scripts/oracle/quantize_fixtures.py`
//! (`$GGUF_DEQUANT_ORACLE/quantized/`).
//!
//! * the CPU codecs decode every fixture to ggml's own f32 (`to_float`, `dequantize_row_q8_K`)
//!   bit for bit;
//! * on Vulkan and GL, every fixture whose format has a shader (`Format::has_shader`) decodes on
//!   the GPU to the CPU's f32, f16 and bf16 bit for bit, and to ggml's f32. Formats without a
//!   shader yet are listed, and are checked as soon as a shader lands.
//!
//! Missing fixtures skip the test loudly, or fail it under `CI=true`; so does a missing adapter.
//! All failures are collected, so one run shows every broken format.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::{DType, Format};
use serde::Deserialize;

use crate::gpu_test;
use crate::support;
use crate::support::codec::{cpu, is_nan, value};
use crate::support::gpu::label;

const TEST: &str = "oracle_quantized";

/// The 16 super-block (256-value) formats: each must have a fixture.
const SUPER_BLOCK: &[&str] = &[
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS",
    "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_XS", "TQ1_0", "TQ2_0",
];

#[derive(Debug, Deserialize)]
struct Manifest {
    source: String,
    fixtures: Vec<Fixture>,
}

#[derive(Debug, Deserialize)]
struct Fixture {
    #[serde(rename = "type")]
    type_name: String,
    type_id: u32,
    variant: String,
    source_tensor: String,
    rows: usize,
    n_per_row: usize,
    quantizer: String,
    blocks: String,
    expected: String,
}

/// A fixture read and checked against its manifest entry.
struct Loaded<'a> {
    fx: &'a Fixture,
    format: Format,
    blocks: Vec<u8>,
    /// ggml's decode, as raw f32 bits.
    expected: Vec<u32>,
}

impl Loaded<'_> {
    fn label(&self) -> String {
        format!(
            "{} {} ({}, {} rows x {}, {})",
            self.fx.type_name,
            self.fx.variant,
            self.fx.source_tensor,
            self.fx.rows,
            self.fx.n_per_row,
            self.fx.quantizer
        )
    }
}

/// The manifest and its directory, or `None` after a loud skip (a panic under `CI=true`).
fn manifest() -> Option<(PathBuf, Manifest)> {
    let path = support::oracle_file(TEST, "quantized/manifest.json")?;
    let text = std::fs::read_to_string(&path).expect("read quantized/manifest.json");
    let m: Manifest = serde_json::from_str(&text).expect("parse quantized/manifest.json");
    Some((path.parent().unwrap().to_path_buf(), m))
}

fn load<'a>(dir: &Path, fx: &'a Fixture) -> Result<Loaded<'a>, String> {
    let format = Format::from_id(fx.type_id).map_err(|e| format!("type id: {e}"))?;
    if format.name() != fx.type_name {
        return Err(format!(
            "manifest names type id {} {:?}, the crate calls it {}",
            fx.type_id,
            fx.type_name,
            format.name()
        ));
    }
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| format!("{name}: {e}"));
    let blocks = read(&fx.blocks)?;
    let expected_raw = read(&fx.expected)?;
    let n = fx.rows * fx.n_per_row;
    if n == 0 || !fx.n_per_row.is_multiple_of(format.block_elems()) {
        return Err(format!(
            "{} rows x {} values do not split into {}-value blocks",
            fx.rows,
            fx.n_per_row,
            format.block_elems()
        ));
    }
    let want_bytes = n / format.block_elems() * format.block_bytes();
    if blocks.len() != want_bytes {
        return Err(format!(
            "blocks file has {} bytes, want {want_bytes} ({n} values in {}-byte blocks)",
            blocks.len(),
            format.block_bytes()
        ));
    }
    if expected_raw.len() != n * 4 {
        return Err(format!(
            "expected file has {} bytes, want {n} f32 values",
            expected_raw.len()
        ));
    }
    let expected = expected_raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(Loaded {
        fx,
        format,
        blocks,
        expected,
    })
}

fn show(dtype: DType, bits: u32) -> String {
    match dtype {
        DType::F32 => format!("{bits:#010x} ({:e})", f32::from_bits(bits)),
        _ => format!("{bits:#06x}"),
    }
}

/// Bit-for-bit equality of two value sequences (any NaN equals any NaN); the error gives the
/// number of differences and the first differing index, with its row and block.
fn diff(
    format: Format,
    n_per_row: usize,
    dtype: DType,
    got: &[u32],
    want: &[u32],
) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} values, want {}", got.len(), want.len()));
    }
    let mut first = None;
    let mut count = 0usize;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if g != w && !(is_nan(dtype, g) && is_nan(dtype, w)) {
            count += 1;
            first.get_or_insert((i, g, w));
        }
    }
    match first {
        None => Ok(()),
        Some((i, g, w)) => Err(format!(
            "{count}/{} {dtype} values differ; first at index {i} (row {}, block {} of the row, element {}): got {} want {}",
            want.len(),
            i / n_per_row,
            i % n_per_row / format.block_elems(),
            i % format.block_elems(),
            show(dtype, g),
            show(dtype, w)
        )),
    }
}

/// Little-endian `dtype` bytes as raw bits per value.
fn bits(dtype: DType, bytes: &[u8]) -> Vec<u32> {
    (0..bytes.len() / dtype.size())
        .map(|i| value(dtype, bytes, i))
        .collect()
}

/// Loads every fixture; load errors and coverage gaps go to `failures`.
fn load_all<'a>(dir: &Path, m: &'a Manifest, failures: &mut Vec<String>) -> Vec<Loaded<'a>> {
    let mut out = Vec::new();
    for fx in &m.fixtures {
        match load(dir, fx) {
            Ok(l) => out.push(l),
            Err(e) => failures.push(format!("{} {}: {e}", fx.type_name, fx.variant)),
        }
    }
    for name in SUPER_BLOCK {
        if !m.fixtures.iter().any(|f| f.type_name == *name) {
            failures.push(format!("{name}: no quantised fixture in the manifest"));
        }
    }
    out
}

#[test]
fn cpu_codecs_match_ggml_on_quantiser_output() {
    let Some((dir, m)) = manifest() else {
        return;
    };
    let mut failures = Vec::new();
    let fixtures = load_all(&dir, &m, &mut failures);
    let mut per_format: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for l in &fixtures {
        let e = per_format.entry(l.fx.type_name.as_str()).or_default();
        e.1 += 1;
        let got = match gguf_dequant::cpu::dequant_f32(l.format, &l.blocks) {
            Ok(v) => v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            Err(err) => {
                failures.push(format!("{}: CPU: {err}", l.label()));
                continue;
            }
        };
        match diff(l.format, l.fx.n_per_row, DType::F32, &got, &l.expected) {
            Ok(()) => e.0 += 1,
            Err(why) => failures.push(format!("{}: CPU vs ggml: {why}", l.label())),
        }
    }
    eprintln!(
        "{TEST}: {} quantised fixtures from {} ({})",
        m.fixtures.len(),
        dir.display(),
        m.source
    );
    for (name, (pass, total)) in &per_format {
        let status = if pass == total { "ok" } else { "FAIL" };
        eprintln!("  {name:<8} {status:<4} {pass}/{total} fixtures (CPU vs ggml)");
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every fixture of a format with a shader, on the GPU, against the CPU (f32, f16, bf16) and
/// against ggml (f32).
fn gpu_matches(engine: &GpuEngine) {
    let backend = label(engine);
    let Some((dir, m)) = manifest() else {
        return;
    };
    let mut failures = Vec::new();
    let fixtures = load_all(&dir, &m, &mut failures);
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    let mut unsupported: Vec<&str> = Vec::new();
    for l in &fixtures {
        let name = l.fx.type_name.as_str();
        if !l.format.has_shader() {
            if !unsupported.contains(&name) {
                unsupported.push(name);
            }
            continue;
        }
        for dtype in DType::ALL {
            let gpu = match engine.dequant(l.format, &l.blocks, dtype) {
                Ok(v) => bits(dtype, &v),
                Err(err) => {
                    failures.push(format!("{}: GPU to {dtype}: {err}", l.label()));
                    continue;
                }
            };
            let cpu = bits(dtype, &cpu(l.format, &l.blocks, dtype));
            if let Err(why) = diff(l.format, l.fx.n_per_row, dtype, &gpu, &cpu) {
                failures.push(format!("{}: {backend} GPU vs CPU: {why}", l.label()));
            }
            if dtype == DType::F32 {
                if let Err(why) = diff(l.format, l.fx.n_per_row, dtype, &gpu, &l.expected) {
                    failures.push(format!("{}: {backend} GPU vs ggml: {why}", l.label()));
                }
            }
        }
        *checked.entry(name).or_default() += 1;
    }
    let super_unsupported: Vec<&str> = SUPER_BLOCK
        .iter()
        .copied()
        .filter(|n| unsupported.contains(n))
        .collect();
    eprintln!(
        "[{TEST}] {backend}: checked {} fixtures of {} formats on the GPU: {}",
        checked.values().sum::<usize>(),
        checked.len(),
        checked.keys().copied().collect::<Vec<_>>().join(" ")
    );
    eprintln!(
        "[{TEST}] {backend}: NOT CHECKED, no shader yet ({} formats, {} of them super-block): {}",
        unsupported.len(),
        super_unsupported.len(),
        unsupported.join(" ")
    );
    assert!(
        failures.is_empty(),
        "{backend}: {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
gpu_test!(gpu_matches_cpu_on_quantiser_output, gpu_matches);

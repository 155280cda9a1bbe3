//! Every CPU codec against the oracle fixtures of `scripts/oracle/make_fixtures.py`: random and
//! exhaustive blocks of every format, decoded by ggml's compiled C, gguf-py 0.19.0 or an independent
//! numpy rule. Bit-exact, except that NaN equals NaN.
//!
//! Needs `GGUF_DEQUANT_ORACLE` (set by `scripts/test.sh`); without it the test is skipped, or fails
//! under `CI=true`. All failures are collected, so one run shows every broken format.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use gguf_dequant::formats::Format;
use serde::Deserialize;

use crate::support;

const TEST: &str = "oracle_codecs";

#[derive(Debug, Deserialize)]
struct Manifest {
    fixtures: Vec<Fixture>,
}

#[derive(Debug, Deserialize)]
struct Fixture {
    #[serde(rename = "type")]
    type_name: String,
    type_id: u32,
    oracle: String,
    #[serde(default)]
    kind: String,
    shape: String,
    #[serde(default = "one")]
    rows: usize,
    n_blocks: usize,
    blocks: String,
    expected: String,
}

fn one() -> usize {
    1
}

impl Fixture {
    fn label(&self) -> String {
        format!(
            "{} [{}] {} {} ({})",
            self.type_name, self.oracle, self.kind, self.shape, self.blocks
        )
    }
}

fn read(dir: &Path, name: &str) -> Result<Vec<u8>, String> {
    std::fs::read(dir.join(name)).map_err(|e| format!("cannot read {name}: {e}"))
}

fn show(bits: u32) -> String {
    format!("{bits:#010x} ({:e})", f32::from_bits(bits))
}

/// Decodes one fixture and compares it with the oracle; `Err` describes every way it failed.
fn check(dir: &Path, fx: &Fixture) -> Result<(), String> {
    let format = Format::from_id(fx.type_id).map_err(|e| format!("type id: {e}"))?;
    if format.name() != fx.type_name {
        return Err(format!(
            "manifest names type id {} {:?}, the crate calls it {}",
            fx.type_id,
            fx.type_name,
            format.name()
        ));
    }
    let (elems, bytes) = (format.block_elems(), format.block_bytes());
    let src = read(dir, &fx.blocks)?;
    let want_raw = read(dir, &fx.expected)?;
    if src.len() != fx.n_blocks * bytes {
        return Err(format!(
            "blocks file has {} bytes, want {} blocks x {bytes} bytes: block size disagrees with the oracle",
            src.len(),
            fx.n_blocks
        ));
    }
    let n = fx.n_blocks * elems;
    if want_raw.len() != n * 4 {
        return Err(format!(
            "expected file has {} f32 values, want {} blocks x {elems}: block geometry disagrees with the oracle",
            want_raw.len() / 4,
            fx.n_blocks
        ));
    }
    if fx.rows == 0 || !fx.n_blocks.is_multiple_of(fx.rows) {
        return Err(format!(
            "bad row count {} for {} blocks",
            fx.rows, fx.n_blocks
        ));
    }
    let want: Vec<u32> = want_raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();

    // Decode row by row, as a tensor reader would; a panicking codec is a failure, not an abort.
    let mut got = vec![0f32; n];
    let per_row = fx.n_blocks / fx.rows;
    let decode = format.spec().dequant_row;
    for (r, (s, d)) in src
        .chunks_exact(per_row * bytes)
        .zip(got.chunks_exact_mut(per_row * elems))
        .enumerate()
    {
        catch_unwind(AssertUnwindSafe(|| decode(s, d))).map_err(|p| {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            format!("dequant_row panicked on row {r}: {msg}")
        })?;
    }

    let mut first = None;
    let mut count = 0usize;
    for (i, (g, &w)) in got.iter().zip(&want).enumerate() {
        let gb = g.to_bits();
        let same = gb == w || (g.is_nan() && f32::from_bits(w).is_nan());
        if !same {
            count += 1;
            first.get_or_insert((i, gb, w));
        }
    }
    match first {
        None => Ok(()),
        Some((i, gb, w)) => Err(format!(
            "{count}/{n} values differ; first at index {i} (block {}, element {}): got {} want {}",
            i / elems,
            i % elems,
            show(gb),
            show(w)
        )),
    }
}

#[test]
fn codecs_match_oracles() {
    let Some(path) = support::oracle_file(TEST, "manifest.json") else {
        return;
    };
    let dir = path.parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(&path).expect("read manifest.json");
    let manifest: Manifest = serde_json::from_str(&text).expect("parse manifest.json");

    let mut failures: Vec<String> = Vec::new();
    let mut per_format: BTreeMap<u32, (usize, usize)> = BTreeMap::new(); // id -> (passed, total)
    let mut oracles: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for fx in &manifest.fixtures {
        let e = per_format.entry(fx.type_id).or_default();
        e.1 += 1;
        oracles
            .entry(fx.type_id)
            .or_default()
            .insert(fx.oracle.clone());
        match check(&dir, fx) {
            Ok(()) => e.0 += 1,
            Err(why) => failures.push(format!("{}: {why}", fx.label())),
        }
    }

    // Coverage: every live format has at least one fixture.
    for f in Format::ALL {
        if !per_format.contains_key(&f.id()) {
            failures.push(format!(
                "{f} (id {}): no oracle fixture in the manifest",
                f.id()
            ));
        }
    }

    eprintln!(
        "oracle_codecs: {} fixtures from {}",
        manifest.fixtures.len(),
        dir.display()
    );
    let mut broken = Vec::new();
    for f in Format::ALL {
        let (pass, total) = per_format.get(&f.id()).copied().unwrap_or((0, 0));
        let who: Vec<_> = oracles
            .get(&f.id())
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let status = if total > 0 && pass == total {
            "ok"
        } else {
            broken.push(f.name());
            "FAIL"
        };
        eprintln!(
            "  {:<8} {status:<4} {pass:>2}/{total:<2} fixtures  oracles: {}",
            f.name(),
            who.join(", ")
        );
    }
    if !failures.is_empty() {
        panic!(
            "{} oracle fixture failures; formats not bit-exact: {}\n{}",
            failures.len(),
            broken.join(" "),
            failures.join("\n")
        );
    }
}

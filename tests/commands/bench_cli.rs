//! `gguf-dequant bench` as a user runs it, on lavapipe Vulkan and llvmpipe GL: a complete,
//! well-formed JSON report for every format with a shader, and a valid SVG chart. Structure and
//! positivity only: speed is never asserted. No silent skips with `CI=true`.

use gguf_dequant::bench;
use gguf_dequant::Format;
use serde_json::Value as Json;

use crate::support::cli::{have, run, text};

const BACKENDS: [&str; 2] = ["vulkan", "gl"];

fn positive(v: &Json, key: &str, row: &Json) -> f64 {
    let x = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing or not a number in {row}"));
    assert!(x > 0.0 && x.is_finite(), "{key} = {x} in {row}");
    x
}

/// Checks a report made with `--dtype both` for every shader format on one adapter of `backend`.
fn check_report(json: &Json, backend: &str) {
    let adapters = json["adapters"].as_array().unwrap();
    assert_eq!(adapters.len(), 1, "{json}");
    let a = &adapters[0];
    for key in ["name", "backend", "device_type", "driver", "timing"] {
        assert!(a[key].is_string(), "adapter field {key}: {a}");
    }
    assert_eq!(a["backend"], backend);
    let results = json["results"].as_array().unwrap();
    let shaders: Vec<Format> = gguf_dequant::formats::WITH_SHADER.to_vec();
    assert_eq!(
        results.len(),
        shaders.len() * 2,
        "one row per format and dtype"
    );
    for f in &shaders {
        for dtype in ["f32", "f16"] {
            let r = results
                .iter()
                .find(|r| r["type"] == f.name() && r["dtype"] == dtype)
                .unwrap_or_else(|| panic!("no row for {f} {dtype}"));
            assert_eq!(r["adapter"], 0, "{r}");
            assert_eq!(r["backend"], backend, "{r}");
            assert!(r["timing"] == "timestamp" || r["timing"] == "wall", "{r}");
            let n = r["n_values"].as_u64().unwrap();
            assert!(n > 0 && n % 256 == 0, "{r}");
            let size = if dtype == "f32" { 4 } else { 2 };
            assert_eq!(r["bytes_out"].as_u64().unwrap(), n * size, "{r}");
            assert_eq!(
                r["bytes_in"].as_u64().unwrap(),
                n / f.block_elems() as u64 * f.block_bytes() as u64,
                "{r}"
            );
            let secs = positive(r, "seconds", r);
            let gbps = positive(r, "gb_per_s", r);
            let bytes = (r["bytes_in"].as_u64().unwrap() + r["bytes_out"].as_u64().unwrap()) as f64;
            assert!((gbps - bytes / secs / 1e9).abs() <= 1e-6 * gbps, "{r}");
            let copy = positive(r, "copy_gb_per_s", r);
            let ratio = positive(r, "ratio_to_copy", r);
            assert!((ratio - gbps / copy).abs() <= 1e-6 * ratio, "{r}");
            positive(r, "cpu_1t_gb_per_s", r);
            positive(r, "cpu_mt_gb_per_s", r);
        }
    }
}

#[test]
fn bench_json_on_both_software_adapters() {
    const TEST: &str = "bench_json_on_both_software_adapters";
    let dir = tempfile::tempdir().unwrap();
    for backend in BACKENDS {
        if !have(backend, TEST) {
            continue;
        }
        let path = dir.path().join(format!("{backend}.json"));
        let o = run(&[
            "bench",
            "--backend",
            backend,
            "--mib",
            "0.0625",
            "--json",
            path.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{backend}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        let json: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        check_report(&json, backend);
        // The table names the adapter and every format.
        let out = text(&o.stdout);
        assert!(out.starts_with("adapter 0: "), "{out}");
        for &f in gguf_dequant::formats::WITH_SHADER {
            assert!(out.contains(f.name()), "{f} missing from the table:\n{out}");
        }
    }
}

#[test]
fn bench_svg_and_json_to_stdout() {
    const TEST: &str = "bench_svg_and_json_to_stdout";
    let dir = tempfile::tempdir().unwrap();
    for backend in BACKENDS {
        if !have(backend, TEST) {
            continue;
        }
        let svg = dir.path().join(format!("{backend}.svg"));
        let o = run(&[
            "bench",
            "--backend",
            backend,
            "--mib",
            "0.0625",
            "--types",
            "q4_0,Q8_0,f16,I32",
            "--dtype",
            "f16",
            "--runs",
            "5",
            "--json",
            "-",
            "--svg",
            svg.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{backend}: {}", text(&o.stderr));
        let json: Json = serde_json::from_slice(&o.stdout).unwrap();
        let results = json["results"].as_array().unwrap();
        assert_eq!(results.len(), 4, "{json}");
        // I32 has no shader: CPU figures only.
        let k = results.iter().find(|r| r["type"] == "I32").unwrap();
        assert!(k["adapter"].is_null() && k["gb_per_s"].is_null() && k["timing"].is_null());
        positive(k, "cpu_1t_gb_per_s", k);
        for r in results.iter().filter(|r| r["type"] != "I32") {
            positive(r, "gb_per_s", r);
            positive(r, "copy_gb_per_s", r);
        }
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(
            s.trim_start().starts_with("<svg"),
            "{}",
            &s[..s.len().min(200)]
        );
        assert!(s.trim_end().ends_with("</svg>"));
        for name in ["Q4_0", "Q8_0", "F16", "copy", "GB/s"] {
            assert!(s.contains(name), "{name} missing from the SVG");
        }
        assert!(!s.contains("I32"), "CPU-only formats are not drawn");
    }
}

#[test]
fn bench_rejects_bad_arguments() {
    for args in [
        &["bench", "--types", "q9_9"][..],
        &["bench", "--dtype", "f64"][..],
        &["bench", "--mib", "0"][..],
        &["bench", "--runs", "3"][..],
    ] {
        let o = run(args);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(!text(&o.stderr).is_empty());
    }
}

#[test]
fn bench_cpu_only_needs_no_adapter() {
    let o = run(&[
        "bench",
        "--types",
        "I32,F64",
        "--dtype",
        "f32",
        "--mib",
        "0.0625",
        "--backend",
        "metal",
        "--json",
        "-",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["adapters"].as_array().unwrap().len(), 0);
    assert_eq!(json["results"].as_array().unwrap().len(), 2);
}

#[test]
fn values_for_mib_rounds_to_whole_workgroups() {
    assert_eq!(bench::values_for_mib(1.0), 1 << 18);
    assert_eq!(bench::values_for_mib(0.0), 256);
    assert_eq!(bench::values_for_mib(0.001) % 256, 0);
}

//! The GPU commands as a user runs them: `selftest`, `adapters`, `verify` and `convert`, on the
//! Vulkan adapter the library ranks first (in CI SwiftShader, which the Vulkan loader enumerates
//! before lavapipe; `selftest --backend all` covers every adapter) and llvmpipe GL; real models
//! from `$GGUF_DEQUANT_MODELS`. No silent skips with `CI=true`.

use std::process::Command;

use gguf_dequant::{Format, GgufFile};
use serde_json::Value as Json;

use crate::support;
use crate::support::cli::{have, run, text, EXE};

const BACKENDS: [&str; 2] = ["vulkan", "gl"];

#[test]
fn selftest_passes_on_both_software_adapters() {
    for backend in BACKENDS {
        if !have(backend, "selftest_passes_on_both_software_adapters") {
            continue;
        }
        let o = run(&["selftest", "--backend", backend]);
        assert!(
            o.status.success(),
            "{backend}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        let out = text(&o.stdout);
        assert!(
            out.lines().last().unwrap().starts_with("selftest passed:"),
            "{out}"
        );
        assert!(out.to_lowercase().contains(backend), "{out}");

        let o = run(&["selftest", "--backend", backend, "--json"]);
        assert!(o.status.success());
        let json: Json = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["backend"], backend);
        let gpu = json["gpu"].as_array().unwrap();
        assert_eq!(gpu.len(), gguf_dequant::formats::WITH_SHADER.len());
        for s in gpu {
            assert_eq!(s["f32_mismatches"], 0, "{s}");
            assert_eq!(s["f16_mismatches"], 0, "{s}");
        }
        assert_eq!(json["cpu"].as_array().unwrap().len(), Format::ALL.len());
    }
}

#[cfg(target_os = "linux")]
#[test]
fn selftest_without_adapter_runs_the_cpu_codecs() {
    let o = run(&["selftest", "--backend", "metal"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("selftest passed on the CPU only"));
    assert!(
        text(&o.stderr).contains("mesa-vulkan-drivers"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn adapters_lists_what_wgpu_sees() {
    let o = run(&["adapters"]);
    assert!(o.status.success());
    let o = run(&["adapters", "--json"]);
    let json: Json = serde_json::from_slice(&o.stdout).unwrap();
    for a in json["adapters"].as_array().unwrap() {
        assert!(
            a["name"].is_string() && a["max_storage_buffer_binding_size"].as_u64().unwrap() > 0
        );
        let (lo, hi) = (
            a["subgroup_min_size"].as_u64(),
            a["subgroup_max_size"].as_u64(),
        );
        assert!(
            a["subgroups"].is_boolean() && lo.unwrap() >= 4 && lo <= hi,
            "{a}"
        );
        // CI's Vulkan implementations (lavapipe, SwiftShader) offer subgroups; GL never does.
        if a["backend"] == "gl" || (support::is_ci() && a["backend"] == "vulkan") {
            assert_eq!(a["subgroups"], a["backend"] == "vulkan", "{a}");
        }
        // No CPU implementation has cooperative matrices; the flags are there for every adapter.
        assert!(
            a["shader_f16"].is_boolean() && a["shader_i16"].is_boolean(),
            "{a}"
        );
        let coop = a["cooperative_matrices"].as_array().unwrap();
        if a["device_type"] == "Cpu" {
            assert!(coop.is_empty(), "{a}");
        }
        assert!(
            a["max_compute_invocations_per_workgroup"].as_u64().unwrap() >= 256,
            "{a}"
        );
    }
    let text = text(&run(&["adapters"]).stdout);
    assert!(
        text.contains("shader-f16, int16:") && text.contains("cooperative matrices:"),
        "{text}"
    );
    for backend in BACKENDS {
        have(backend, "adapters_lists_what_wgpu_sees");
    }
    // Every implementation the run expects (in CI lavapipe, SwiftShader, llvmpipe GL), as compute.
    for (backend, name) in support::expected_adapters("adapters_lists_what_wgpu_sees")
        .into_iter()
        .flatten()
    {
        assert!(
            json["adapters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["backend"] == backend
                    && a["name"].as_str().unwrap().contains(&name)
                    && a["compute"] == true),
            "no {backend} compute adapter `*{name}*` in {json}"
        );
    }
}

#[test]
fn verify_real_models_on_both_backends() {
    const TEST: &str = "verify_real_models_on_both_backends";
    for model in support::MODEL_FILES {
        let Some(path) = support::model_file(TEST, model) else {
            return;
        };
        let file = GgufFile::open(&path).unwrap();
        for backend in BACKENDS {
            if !have(backend, TEST) {
                continue;
            }
            let o = run(&[
                "verify",
                path.to_str().unwrap(),
                "--backend",
                backend,
                "--json",
            ]);
            assert!(
                o.status.success(),
                "{model} on {backend}: {}",
                text(&o.stderr)
            );
            let json: Json = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(json["ok"], true);
            assert_eq!(json["backend"], backend);
            let tensors = json["tensors"].as_array().unwrap();
            assert_eq!(tensors.len(), file.tensors().len(), "one entry per tensor");
            for (j, t) in tensors.iter().zip(file.tensors()) {
                assert_eq!(j["name"], t.name.as_str());
                assert_eq!(j["type"], t.format.name());
                assert_eq!(j["n_values"], t.n_elements);
                assert_eq!(j["mismatches"], 0);
                assert_eq!(j["max_ulp"], 0);
                assert_eq!(j["gpu"], t.format.has_shader(), "{}", t.name);
            }
        }
    }
}

#[test]
fn convert_gemma_to_f16_equals_ggml_rounded() {
    const TEST: &str = "convert_gemma_to_f16_equals_ggml_rounded";
    let Some(model) = support::model_file(TEST, support::MODEL_FILES[1]) else {
        return;
    };
    let Some(python) = support::python(TEST) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gemma.safetensors");
    let o = run(&[
        "convert",
        model.to_str().unwrap(),
        out.to_str().unwrap(),
        "--dtype",
        "f16",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let summary: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["tensors"], 236);
    assert_eq!(summary["dtype"], "f16");

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/oracle/check_convert.py"
    );
    let o = Command::new(python)
        .args([script, out.to_str().unwrap(), model.to_str().unwrap()])
        .output()
        .unwrap();
    let result: Json = serde_json::from_slice(&o.stdout).unwrap_or(Json::Null);
    assert!(
        o.status.success(),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert_eq!(
        result["types"],
        serde_json::json!(["F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"])
    );

    let bytes = std::fs::read(&out).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let meta = meta.metadata().as_ref().unwrap();
    assert_eq!(meta["general.architecture"], "gemma3");
    assert_eq!(meta["format"], "pt");
}

#[test]
fn bad_requests_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.gguf");
    let npy = dir.path().join("x.npy");
    for args in [
        vec!["verify", missing.to_str().unwrap()],
        vec!["convert", missing.to_str().unwrap(), "x.safetensors"],
        vec!["convert", missing.to_str().unwrap(), npy.to_str().unwrap()],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = text(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
    }
    assert!(!npy.exists());
}

/// `load --dtype f16` of the Gemma model, measured from outside with `/usr/bin/time -v`, keeps
/// peak RSS below the resident bytes + the file size + the staging budget, from the memory map and
/// with plain reads. (On a software adapter the "GPU" buffers live in host memory too, which is
/// why the resident bytes are part of the bound.) The bound is lavapipe's: where
/// `VK_ICD_FILENAMES` also lists SwiftShader (as CI's does), the child sees only its lavapipe
/// entry. SwiftShader, which the loader would rank first, costs more host memory than the
/// bytes resident (measured: gemma f16 877 MB alone, 931 MB with lavapipe's driver loaded too,
/// against lavapipe's 788 MB; about 0.3 MB more per dequantised tensor, none for raw loads), so
/// the bound does not hold there.
#[test]
fn load_peak_rss_is_bounded() {
    const TEST: &str = "load_peak_rss_is_bounded";
    let Some(model) = support::model_file(TEST, support::MODEL_FILES[1]) else {
        return;
    };
    if !have("vulkan", TEST) {
        return;
    }
    let time = std::path::Path::new("/usr/bin/time");
    if !time.exists() {
        support::missing(TEST, "/usr/bin/time is missing (Debian package `time`)");
        return;
    }
    let file_size = std::fs::metadata(&model).unwrap().len();
    let lavapipe_only = std::env::var("VK_ICD_FILENAMES").ok().map(|list| {
        let lvp: Vec<&str> = list.split(':').filter(|p| p.contains("lvp_icd")).collect();
        assert!(
            !lvp.is_empty(),
            "VK_ICD_FILENAMES={list} has no lavapipe (lvp_icd) entry"
        );
        lvp.join(":")
    });
    for source in ["mmap", "read"] {
        let mut cmd = Command::new(time);
        if let Some(icd) = &lavapipe_only {
            cmd.env("VK_ICD_FILENAMES", icd);
        }
        let o = cmd
            .arg("-v")
            .arg(EXE)
            .args([
                "load",
                model.to_str().unwrap(),
                "--dtype",
                "f16",
                "--backend",
                "vulkan",
            ])
            .args(["--source", source, "--json"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{source}: {}", text(&o.stderr));
        let report: Json = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["tensors"], 236);
        assert_eq!(report["dtype"], "f16");
        let err = text(&o.stderr);
        let kib: u64 = err
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Maximum resident set size (kbytes): ")
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no RSS in: {err}"));
        let peak = kib * 1024;
        let resident = report["bytes_resident"].as_u64().unwrap();
        let staging = report["staging_bytes"].as_u64().unwrap();
        let bound = resident + file_size + staging;
        eprintln!("[{TEST}] {source} on {}: peak RSS {peak} bytes, bound {bound} (resident {resident} + file {file_size} + staging {staging})", report["adapter"]);
        assert!(peak < bound, "{source}: peak RSS {peak} >= {bound}");
    }
}

/// `load` reports the device creation, setup and transfer apart, the rooflines measured in the
/// same run (read warm, read cold or why not, host to device) and the transfer's fraction of the
/// smaller bound, in text and in JSON (the fields of before unchanged); `--no-roofline` skips
/// them and `--cold` loads from the disk (or says in one line why it cannot).
#[test]
fn load_reports_phases_and_rooflines() {
    const TEST: &str = "load_reports_phases_and_rooflines";
    let Some(model) = support::model_file(TEST, support::MODEL_FILES[0]) else {
        return;
    };
    let model = model.to_str().unwrap();
    for backend in BACKENDS {
        if !have(backend, TEST) {
            continue;
        }
        let base = [
            "load",
            model,
            "--backend",
            backend,
            "--dtype",
            "raw",
            "--json",
        ];
        let o = run(&[&base[..], &["--source", "read", "--readers", "3"]].concat());
        assert!(o.status.success(), "{backend}: {}", text(&o.stderr));
        let j: Json = serde_json::from_slice(&o.stdout).unwrap();
        eprintln!("[{TEST}] {backend}: {j}");
        assert_eq!(j["tensors"], 272);
        assert_eq!(j["source"], "read");
        assert_eq!(j["readers"], 3);
        assert_eq!(j["cold"], false);
        let secs = |k: &str| j[k].as_f64().unwrap_or_else(|| panic!("{k}: {j}"));
        assert!(secs("device_seconds") > 0.0);
        assert!(secs("setup_seconds") + secs("transfer_seconds") <= secs("seconds") + 1e-6);
        let bytes = j["bytes_read"].as_f64().unwrap();
        assert!((secs("transfer_gb_per_s") - bytes / secs("transfer_seconds") / 1e9).abs() < 1e-6);
        let r = &j["rooflines"];
        let warm = r["read_warm_gb_per_s"].as_f64().unwrap();
        let h2d = r["h2d_gb_per_s"].as_f64().unwrap();
        assert!(warm > 0.0 && h2d > 0.0 && r["h2d_reused_gb_per_s"].as_f64().unwrap() > 0.0);
        assert_eq!(
            r["read_warm_bytes"],
            std::fs::metadata(model).unwrap().len()
        );
        assert!(r["read_cold_gb_per_s"].is_f64() != r["read_cold_not_measured"].is_string());
        assert_eq!(r["bound_gb_per_s"].as_f64().unwrap(), warm.min(h2d));
        let fraction = secs("fraction");
        assert!((fraction - secs("transfer_gb_per_s") / warm.min(h2d)).abs() < 1e-9);

        let o = run(&[&base[..], &["--no-roofline"]].concat());
        assert!(o.status.success(), "{backend}: {}", text(&o.stderr));
        let j: Json = serde_json::from_slice(&o.stdout).unwrap();
        assert!(j["rooflines"].is_null() && j["fraction"].is_null(), "{j}");

        let o = run(&[
            "load",
            model,
            "--backend",
            backend,
            "--dtype",
            "raw",
            "--cold",
        ]);
        let out = text(&o.stdout);
        if o.status.success() {
            assert!(out.contains("from the disk"), "{out}");
            assert!(out.contains("read cold:      "), "{out}");
            assert!(out.contains("fraction:       "), "{out}");
            assert!(out.contains("host to device: "), "{out}");
        } else {
            let err = text(&o.stderr);
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with("error: cannot load from the disk: "),
                "{err}"
            );
        }
    }
}

/// `selftest --backend all` checks every compute adapter: every software adapter (in CI the three
/// of `GGUF_DEQUANT_EXPECT_ADAPTERS`), each with every shader format bit-identical, in one report.
#[test]
fn selftest_all_checks_every_adapter() {
    const TEST: &str = "selftest_all_checks_every_adapter";
    let have: Vec<&str> = BACKENDS.into_iter().filter(|b| have(b, TEST)).collect();
    let o = run(&["selftest", "--backend", "all", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["cpu"].as_array().unwrap().len(), Format::ALL.len());
    let adapters = json["adapters"].as_array().unwrap();
    let shaders = gguf_dequant::formats::WITH_SHADER.len();
    for backend in &have {
        let a = adapters
            .iter()
            .find(|a| a["backend"] == *backend)
            .unwrap_or_else(|| panic!("no {backend} adapter in {json}"));
        assert_eq!(a["ok"], true);
        assert_eq!(a["gpu"].as_array().unwrap().len(), shaders);
    }
    for (backend, name) in support::expected_adapters(TEST).into_iter().flatten() {
        let a = adapters
            .iter()
            .find(|a| a["backend"] == backend && a["adapter"].as_str().unwrap().contains(&name))
            .unwrap_or_else(|| panic!("no {backend} adapter `*{name}*` in {json}"));
        assert_eq!(a["ok"], true, "{a}");
        assert_eq!(a["gpu"].as_array().unwrap().len(), shaders);
    }
    let o = run(&["selftest", "--backend", "all"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let passed = out
        .lines()
        .filter(|l| l.starts_with("selftest passed:"))
        .count();
    assert_eq!(passed, adapters.len(), "{out}");
}

//! `load --devices`: one model over several adapters from the command line (in CI lavapipe,
//! SwiftShader and llvmpipe GL; fewer than 3 compute adapters is a failure under `CI=true`), the
//! adapter numbers of `adapters`, and one-line errors for devices, splits and budgets that cannot
//! work.

use serde_json::Value as Json;

use crate::support;
use crate::support::cli::{run, text};
use crate::support::gguf::{random_tensors, temp_file};

/// Six layers of three tensors, an input and two output tensors: 21 tensors, 1-D.
fn write_model() -> (tempfile::TempDir, gguf_dequant::GgufFile) {
    let mut w = gguf_dequant::gguf::GgufWriter::new();
    let mut names = vec![(
        "token_embd.weight".to_string(),
        gguf_dequant::Format::Q6_K,
        4,
    )];
    for l in 0..6 {
        names.push((
            format!("blk.{l}.attn_q.weight"),
            gguf_dequant::Format::Q4_K,
            2,
        ));
        names.push((
            format!("blk.{l}.ffn_up.weight"),
            gguf_dequant::Format::Q8_0,
            5,
        ));
        names.push((
            format!("blk.{l}.attn_norm.weight"),
            gguf_dequant::Format::F32,
            64,
        ));
    }
    names.push((
        "output_norm.weight".to_string(),
        gguf_dequant::Format::F32,
        64,
    ));
    names.push(("output.weight".to_string(), gguf_dequant::Format::Q8_0, 6));
    let tensors: Vec<_> = names.iter().map(|(n, f, b)| (n.as_str(), *f, *b)).collect();
    random_tensors(&mut w, &tensors, 41);
    temp_file(&w, "devices.gguf")
}

/// The compute adapters `adapters --json` numbers; fewer than 3 fails under CI, fewer than 2
/// skips elsewhere (`None`).
fn compute_adapters(test: &str) -> Option<Vec<Json>> {
    let o = run(&["adapters", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: Json = serde_json::from_slice(&o.stdout).unwrap();
    let compute: Vec<Json> = json["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["compute"] == true)
        .cloned()
        .collect();
    if compute.len() < 3 && support::is_ci() {
        panic!(
            "{test}: {} compute adapters, CI needs 3: {json}",
            compute.len()
        );
    }
    if compute.len() < 2 {
        support::missing(test, "fewer than 2 compute adapters");
        return None;
    }
    Some(compute)
}

#[test]
fn adapters_are_numbered_as_devices_takes_them() {
    let Some(compute) = compute_adapters("adapters_are_numbered_as_devices_takes_them") else {
        return;
    };
    // Compute adapters first, numbered 0.. in order; the text prints the same numbers.
    for (i, a) in compute.iter().enumerate() {
        assert_eq!(a["index"], i, "{a}");
    }
    let o = run(&["adapters"]);
    let out = text(&o.stdout);
    for (i, a) in compute.iter().enumerate() {
        let line = format!("[{i}] {}", a["name"].as_str().unwrap());
        assert!(out.lines().any(|l| l.starts_with(&line)), "{line} in {out}");
    }
}

#[test]
fn load_over_every_device() {
    const TEST: &str = "load_over_every_device";
    let Some(compute) = compute_adapters(TEST) else {
        return;
    };
    let n = compute.len();
    let (_dir, file) = write_model();
    let path = file.path().to_str().unwrap();
    let o = run(&["load", path, "--devices", "all", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: Json = serde_json::from_slice(&o.stdout).unwrap();
    let devices = json["devices"].as_array().unwrap();
    assert_eq!(devices.len(), n, "{json}");
    let sum = |key: &str| {
        devices
            .iter()
            .map(|d| d[key].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sum("tensors"), file.tensors().len() as u64);
    assert_eq!(json["tensors"], file.tensors().len());
    // f16 by default: two bytes a value.
    let values: u64 = file.tensors().iter().map(|t| t.n_elements).sum();
    assert_eq!(sum("bytes_resident"), 2 * values);
    assert_eq!(json["bytes_resident"], 2 * values);
    let mut layers = Vec::new();
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d["index"], i, "{d}");
        assert_eq!(d["adapter"], compute[i]["name"], "{d}");
        assert_eq!(d["backend"], compute[i]["backend"], "{d}");
        layers.extend(
            d["layers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_u64().unwrap()),
        );
    }
    assert_eq!(layers, (0..6).collect::<Vec<_>>());
    assert_eq!(json["adapter"], compute[0]["name"]);

    // Text: one line per device, in the order given, with the roles asked for.
    let o = run(&[
        "load",
        path,
        "--devices",
        "1,0",
        "--tensor-split",
        "1,2",
        "--input-device",
        "1",
        "--output-device",
        "1",
        "--dtype",
        "raw",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("  [")).collect();
    assert_eq!(lines.len(), 2, "{out}");
    // Shares 1,2 of six layers: c = [1/3, 1]; layers 0 and 1 on adapter 1.
    assert!(
        lines[0].starts_with("  [1] ") && lines[0].contains("layers 0-1,"),
        "{out}"
    );
    assert!(lines[0].ends_with("input, output"), "{out}");
    // 4 layers of 3 tensors on adapter 0.
    assert!(
        lines[1].starts_with("  [0] ") && lines[1].contains("layers 2-5, 12 tensors"),
        "{out}"
    );
}

#[test]
fn bad_device_requests_are_one_line_errors() {
    let (_dir, file) = write_model();
    let path = file.path().to_str().unwrap();
    let adapters = run(&["adapters", "--json"]);
    let json: Json = serde_json::from_slice(&adapters.stdout).unwrap();
    let any = json["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["compute"] == true);
    if !any {
        support::missing(
            "bad_device_requests_are_one_line_errors",
            "no compute adapter",
        );
        return;
    }
    for (args, word) in [
        (vec!["load", path, "--devices", "0,9"], "adapter 9"),
        (
            vec!["load", path, "--devices", "0", "--budget-mib", "0"],
            "budget",
        ),
        (
            vec!["load", path, "--devices", "0", "--tensor-split", "1,1"],
            "--tensor-split",
        ),
        (vec!["load", path, "--devices", "0,0"], "twice"),
        (
            vec!["load", path, "--devices", "0", "--input-device", "3"],
            "--input-device",
        ),
    ] {
        let o = run(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(word),
            "{args:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // The placement options need --devices; --devices takes no --backend (usage errors).
    for args in [
        vec!["load", path, "--tensor-split", "1,1"],
        vec!["load", path, "--budget-mib", "1"],
        vec!["load", path, "--devices", "all", "--backend", "vulkan"],
        vec![
            "load",
            path,
            "--devices",
            "0",
            "--tensor-split",
            "1",
            "--budget-mib",
            "1",
        ],
    ] {
        assert_eq!(run(&args).status.code(), Some(2), "{args:?}");
    }
}

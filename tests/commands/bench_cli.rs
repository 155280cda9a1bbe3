//! `gguf-dequant bench` as a user runs it, on lavapipe Vulkan and llvmpipe GL: a complete,
//! well-formed JSON report (schema 3) for every format with a shader whose figures agree with
//! each other (ratios = GB/s ÷ each roofline, the rotation rule), the kernel rows (`--kernels`)
//! on a tiny shape, a valid SVG chart, and `--compare` of two reports (schema 2 and 3).
//! Structure and consistency only: speed is never asserted. A bench run also checks the shader-copy kernel's output word for word on each adapter before timing,
//! so every successful run here is that check passing on lavapipe and GL. No silent skips with
//! `CI=true`.

use std::path::Path;

use gguf_dequant::bench::{self, rotation};
use gguf_dequant::Format;
use serde_json::Value as Json;

use crate::support::cli::{have, run, text};

const BACKENDS: [&str; 2] = ["vulkan", "gl"];

/// The rotation target the tests ask for (MiB), to stay fast.
const ROTATE_MIB: &str = "1";

fn positive(v: &Json, key: &str, row: &Json) -> f64 {
    let x = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing or not a number in {row}"));
    assert!(x > 0.0 && x.is_finite(), "{key} = {x} in {row}");
    x
}

fn close(a: f64, b: f64, what: &str, row: &Json) {
    assert!(
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
        "{what}: {a} vs {b} in {row}"
    );
}

fn u(v: &Json, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing or not an integer in {v}"))
}

/// The report's own fields: schema, tool, version, date (UTC, RFC 3339), host, sizes.
fn check_header(json: &Json) {
    assert_eq!(json["schema"], 5, "{json}");
    assert_eq!(json["tool"], "gguf-dequant");
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    let date = json["date"].as_str().expect("date");
    let b = date.as_bytes();
    assert!(
        date.len() == 20 && b[4] == b'-' && b[10] == b'T' && b[13] == b':' && date.ends_with('Z'),
        "RFC 3339 UTC: {date}"
    );
    assert!(json["host"].is_string() || json["host"].is_null());
    for key in ["n_values", "runs", "warmup", "cpu_threads"] {
        assert!(json[key].is_u64(), "{key}: {json}");
    }
    assert!(json["budget_seconds"].is_null() || json["budget_seconds"].as_f64().unwrap() > 0.0);
    // Without a budget every row times the runs asked for.
    if json["budget_seconds"].is_null() {
        let rows = json["results"].as_array().unwrap().iter();
        for r in rows.chain(json["kernels"].as_array().unwrap()) {
            assert!(r["runs"].is_null() || r["runs"] == json["runs"], "{r}");
        }
    }
}

/// Checks one GPU row: sizes, each figure against its definition, and the rotation rule.
fn check_gpu_row(r: &Json, f: Format, target: u64) {
    let n = u(r, "n_values");
    assert!(n > 0 && n.is_multiple_of(256), "{r}");
    let size = match r["dtype"].as_str().unwrap() {
        "f32" => 4,
        _ => 2,
    };
    assert!(u(r, "runs") >= 1, "{r}");
    let (bytes_in, bytes_out) = (u(r, "bytes_in"), u(r, "bytes_out"));
    assert_eq!(bytes_out, n * size, "{r}");
    assert_eq!(
        bytes_in,
        n / f.block_elems() as u64 * f.block_bytes() as u64,
        "{r}"
    );
    let traffic = bytes_in + bytes_out;
    assert!(r["timing"] == "timestamp" || r["timing"] == "wall", "{r}");
    let secs = positive(r, "seconds", r);
    let gbps = positive(r, "gb_per_s", r);
    close(gbps, traffic as f64 / secs / 1e9, "gb_per_s", r);
    // Buffer copy: (in + out) / 2 bytes read and written.
    let copy_bytes = u(r, "copy_bytes");
    assert_eq!(copy_bytes, traffic.div_ceil(2).div_ceil(4) * 4, "{r}");
    let copy = positive(r, "copy_gb_per_s", r);
    close(
        copy,
        2.0 * copy_bytes as f64 / positive(r, "copy_seconds", r) / 1e9,
        "copy",
        r,
    );
    close(
        positive(r, "ratio_to_copy", r),
        gbps / copy,
        "ratio_to_copy",
        r,
    );
    // Shader copy: the same traffic, each window's input and output rounded up to 16 bytes.
    let shader_bytes = u(r, "shader_copy_bytes");
    assert!(
        shader_bytes >= traffic && shader_bytes < traffic + 32 * 8,
        "{r}"
    );
    let shader = positive(r, "shader_copy_gb_per_s", r);
    let shader_secs = positive(r, "shader_copy_seconds", r);
    close(
        shader,
        shader_bytes as f64 / shader_secs / 1e9,
        "shader copy",
        r,
    );
    close(
        positive(r, "ratio_to_shader_copy", r),
        gbps / shader,
        "ratio_to_shader_copy",
        r,
    );
    // Rotation: the fewest pairs that reach the target (or the cap), and what a run moved.
    let pairs = u(r, "rotation_pairs");
    assert!(pairs >= 1, "{r}");
    assert_eq!(u(r, "rotation_bytes_per_run"), pairs * traffic, "{r}");
    assert!(
        pairs * traffic >= target || pairs == rotation::MAX_PAIRS,
        "too few pairs: {r}"
    );
    assert!(
        pairs == 1 || (pairs - 1) * traffic < target,
        "too many pairs: {r}"
    );
}

/// Checks a report made with `--dtype both` for every shader format on one adapter of `backend`
/// with a rotation target of `target` bytes.
fn check_report(json: &Json, backend: &str, target: u64) {
    check_header(json);
    let adapters = json["adapters"].as_array().unwrap();
    assert_eq!(adapters.len(), 1, "{json}");
    let a = &adapters[0];
    for key in ["name", "backend", "device_type", "driver", "timing"] {
        assert!(a[key].is_string(), "adapter field {key}: {a}");
    }
    assert_eq!(a["backend"], backend);
    assert_eq!(u(a, "rotation_target_bytes"), target, "{a}");
    let results = json["results"].as_array().unwrap();
    assert_eq!(
        json["kernels"],
        serde_json::json!([]),
        "no kernels unless asked for"
    );
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
            check_gpu_row(r, *f, target);
            positive(r, "cpu_1t_gb_per_s", r);
            positive(r, "cpu_mt_gb_per_s", r);
        }
    }
    // The adapter's rooflines are the medians of its rows.
    for (key, row_key) in [
        ("copy_gb_per_s", "copy_gb_per_s"),
        ("shader_copy_gb_per_s", "shader_copy_gb_per_s"),
    ] {
        let mut v: Vec<f64> = results
            .iter()
            .map(|r| r[row_key].as_f64().unwrap())
            .collect();
        v.sort_by(f64::total_cmp);
        let median = (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0;
        close(positive(a, key, a), median, key, a);
    }
}

/// A bench run on `backend` into `path` (`extra` appended), without a time budget unless
/// `extra` names one (every row rotates and runs as planned); panics with its output on failure.
fn bench_into(backend: &str, path: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "bench",
        "--backend",
        backend,
        "--mib",
        "0.0625",
        "--json",
        path.to_str().unwrap(),
    ];
    if !extra.contains(&"--rotate-mib") {
        args.extend(["--rotate-mib", ROTATE_MIB]);
    }
    if !extra.contains(&"--budget") {
        args.extend(["--budget", "0"]);
    }
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(
        o.status.success(),
        "{backend}: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
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
        let out = bench_into(backend, &path, &[]);
        let json: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        check_report(&json, backend, 1 << 20);
        // The table names the adapter, every format, both rooflines and the rotation.
        assert!(out.starts_with("adapter 0: "), "{out}");
        for &f in gguf_dequant::formats::WITH_SHADER {
            assert!(out.contains(f.name()), "{f} missing from the table:\n{out}");
        }
        for line in [
            "rooflines of adapter 0: copy_buffer_to_buffer ",
            "rotation on adapter 0: ",
        ] {
            assert!(out.contains(line), "{line} missing from the table:\n{out}");
        }
    }
}

/// A budget smaller than any run: every measurement is its probe, one run over one buffer pair
/// or weight copy; the rows say so.
#[test]
fn bench_budget_shrinks_rotation_and_runs() {
    const TEST: &str = "bench_budget_shrinks_rotation_and_runs";
    let dir = tempfile::tempdir().unwrap();
    for backend in BACKENDS {
        if !have(backend, TEST) {
            continue;
        }
        let path = dir.path().join(format!("{backend}-budget.json"));
        let extra = [
            "--rotate-mib",
            "4",
            "--budget",
            "1e-9",
            "--types",
            "q4_k",
            "--dtype",
            "f32",
        ];
        let kernels = [
            "--kernels",
            "matvec,matmul",
            "--shape",
            "256x64",
            "--matmul-batch",
            "8",
        ];
        bench_into(
            backend,
            &path,
            &[&extra[..], &kernels, &["--no-cpu"]].concat(),
        );
        let json: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        check_header(&json);
        assert_eq!(json["budget_seconds"], 1e-9, "{json}");
        let rows = json["results"].as_array().unwrap();
        let kernels = json["kernels"].as_array().unwrap();
        assert_eq!((rows.len(), kernels.len()), (1, 2), "{json}");
        for r in rows.iter().chain(kernels) {
            assert_eq!(u(r, "runs"), 1, "{r}");
            assert_eq!(u(r, "rotation_pairs"), 1, "{r}");
            positive(r, "seconds", r);
        }
        let traffic = u(&rows[0], "bytes_in") + u(&rows[0], "bytes_out");
        assert_eq!(u(&rows[0], "rotation_bytes_per_run"), traffic);
        for r in kernels {
            assert_eq!(u(r, "dequant_rotation_pairs"), 1, "{r}");
        }
        let matvec = kernels.iter().find(|r| r["kernel"] == "matvec").unwrap();
        assert_eq!(u(matvec, "unfused_rotation_pairs"), 1, "{matvec}");
        assert_eq!(
            u(matvec, "rotation_bytes_per_run"),
            u(matvec, "weight_bytes")
        );
    }
}

/// `--one-weight`: the same number of calls per timed run as the rotation plans, all on one
/// weight copy (and one f16 copy), said in the JSON and under the table; `--variant` and
/// `--precision` named in both.
#[test]
fn bench_one_weight_times_the_planned_calls_on_one_copy() {
    const TEST: &str = "bench_one_weight_times_the_planned_calls_on_one_copy";
    let dir = tempfile::tempdir().unwrap();
    for backend in BACKENDS {
        if !have(backend, TEST) {
            continue;
        }
        let path = dir.path().join(format!("{backend}-one-weight.json"));
        let args = [
            "--types",
            "q4_0",
            "--dtype",
            "none",
            "--no-cpu",
            "--kernels",
            "matvec,get_rows",
            "--shape",
            "256x64",
            "--rotate-mib",
            "1",
        ];
        let table = bench_into(backend, &path, &[&args[..], &["--one-weight"]].concat());
        assert!(
            table.contains("on one weight copy (--one-weight"),
            "{table}"
        );
        let json: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let kernels = json["kernels"].as_array().unwrap();
        assert_eq!(kernels.len(), 2, "{json}");
        for r in kernels {
            assert_eq!(r["one_weight"], true, "{r}");
            // 1 MiB over a 9 KiB weight: many calls, though only one copy exists.
            assert!(u(r, "rotation_pairs") > 1, "{r}");
            positive(r, "seconds", r);
        }
        let matvec = kernels.iter().find(|r| r["kernel"] == "matvec").unwrap();
        assert!(u(matvec, "unfused_rotation_pairs") > 1, "{matvec}");
        let a = &json["adapters"][0];
        assert!(
            a["matvec_variant"] == "classic" && a["precision"] == "exact",
            "{a}"
        );
        // Rotating again, with a forced variant and mode: both named in the JSON and the table.
        let forced = ["--variant", "rows:64x2", "--precision", "factored"];
        let table = bench_into(backend, &path, &[&args[..], &forced].concat());
        assert!(
            table.contains("matvec variant rows:64x2") && table.contains("precision factored"),
            "{table}"
        );
        let json: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let a = &json["adapters"][0];
        assert!(
            a["matvec_variant"] == "rows:64x2" && a["precision"] == "factored",
            "{a}"
        );
        for r in json["kernels"].as_array().unwrap() {
            assert_eq!(r["one_weight"], false, "{r}");
        }
        // Per row, the kernel each call ran: Q4_0's factored matvec on 64 invocations and 2
        // rows (at one column; the largest rows shape's 64x2 at any of its columns).
        let matvec = json["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kernel"] == "matvec")
            .unwrap();
        assert!(
            matvec["variant"]
                .as_str()
                .is_some_and(|v| v.starts_with("matvec.Q4_0.c1.w64.r2.") && v.contains(".fac")),
            "{matvec}"
        );
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
            "--rotate-mib",
            ROTATE_MIB,
            "--types",
            "q4_0,Q8_0,f16,I32",
            "--dtype",
            "f16",
            "--runs",
            "5",
            "--budget",
            "0",
            "--json",
            "-",
            "--svg",
            svg.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{backend}: {}", text(&o.stderr));
        let json: Json = serde_json::from_slice(&o.stdout).unwrap();
        check_header(&json);
        let results = json["results"].as_array().unwrap();
        assert_eq!(results.len(), 4, "{json}");
        // I32 has no shader: CPU figures only.
        let k = results.iter().find(|r| r["type"] == "I32").unwrap();
        for key in [
            "adapter",
            "gb_per_s",
            "timing",
            "shader_copy_gb_per_s",
            "rotation_pairs",
        ] {
            assert!(k[key].is_null(), "{key}: {k}");
        }
        positive(k, "cpu_1t_gb_per_s", k);
        for r in results.iter().filter(|r| r["type"] != "I32") {
            let f = Format::from_name(r["type"].as_str().unwrap()).unwrap();
            check_gpu_row(r, f, 1 << 20);
        }
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(
            s.trim_start().starts_with("<svg"),
            "{}",
            &s[..s.len().min(200)]
        );
        assert!(s.trim_end().ends_with("</svg>"));
        for name in ["Q4_0", "Q8_0", "F16", "buffer copy", "shader copy", "GB/s"] {
            assert!(s.contains(name), "{name} missing from the SVG");
        }
        assert!(!s.contains("I32"), "CPU-only formats are not drawn");
    }
}

/// Two reports (lavapipe and GL where both exist, else two runs on one) merge into one table
/// and one chart that name every adapter, without running anything.
#[test]
fn bench_compare_merges_reports() {
    const TEST: &str = "bench_compare_merges_reports";
    let dir = tempfile::tempdir().unwrap();
    let backends: Vec<&str> = BACKENDS.into_iter().filter(|b| have(b, TEST)).collect();
    let Some(&first) = backends.first() else {
        return;
    };
    let second = backends.get(1).copied().unwrap_or(first);
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let types = ["--types", "Q4_0,Q4_K", "--dtype", "f16", "--no-cpu"];
    bench_into(first, &a, &types);
    bench_into(second, &b, &["--types", "Q4_0,Q8_0", "--dtype", "f16"]);
    let svg = dir.path().join("both.svg");
    let o = run(&[
        "bench",
        "--compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let report = |p: &Path| -> Json { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let (ja, jb) = (report(&a), report(&b));
    for (j, (json, file)) in [(&ja, &a), (&jb, &b)].into_iter().enumerate() {
        let adapter = &json["adapters"][0];
        let name = format!(
            "A{j}: {} ({})",
            adapter["name"].as_str().unwrap(),
            adapter["backend"].as_str().unwrap()
        );
        assert!(out.contains(&name), "{name} missing:\n{out}");
        assert!(out.contains(file.to_str().unwrap()), "{out}");
        assert!(out.contains("shader copy"), "{out}");
    }
    // One line per (type, dtype) of either report, with both adapters' columns.
    let header = out
        .lines()
        .find(|l| l.starts_with("type "))
        .expect("header");
    assert!(
        header.contains("A0 GB/s") && header.contains("A1 GB/s"),
        "{header}"
    );
    for t in ["Q4_0", "Q4_K", "Q8_0"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{t:<8} f16")))
            .unwrap_or_else(|| panic!("{t} missing:\n{out}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells.len(), 2 + 3 * 2, "{line}");
    }
    // Q4_0 is in both: its figures are the reports' own.
    let q4 = out.lines().find(|l| l.starts_with("Q4_0 ")).unwrap();
    let gbps = |j: &Json| {
        let r = j["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["type"] == "Q4_0")
            .unwrap();
        format!("{:.2}", r["gb_per_s"].as_f64().unwrap())
    };
    let cells: Vec<&str> = q4.split_whitespace().collect();
    assert_eq!(
        (cells[2], cells[5]),
        (gbps(&ja).as_str(), gbps(&jb).as_str())
    );
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.trim_end().ends_with("</svg>"));
    for name in [
        "Q4_0",
        "Q4_K",
        "Q8_0",
        "llvmpipe",
        "buffer copy",
        "shader copy",
    ] {
        assert!(s.contains(name), "{name} missing from the SVG");
    }
}

/// `--compare` of a file it cannot read is one `error:` line naming the file; it runs nothing.
#[test]
fn bench_compare_rejects_unreadable_reports() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let cases = [
        (write("text.json", "not json at all\n"), "not a JSON file"),
        (
            write("old.json", r#"{"adapters": [], "results": [], "runs": 7}"#),
            "no \"schema\" field",
        ),
        (write("future.json", r#"{"schema": 6}"#), "schema 6"),
        (
            write("partial.json", r#"{"schema": 2, "tool": "gguf-dequant"}"#),
            "missing field",
        ),
        (dir.path().join("absent.json"), "absent.json"),
    ];
    for (path, why) in &cases {
        let o = run(&["bench", "--compare", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{path:?}");
        let err = text(&o.stderr);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(
            err.contains(path.to_str().unwrap()),
            "names the file: {err}"
        );
        assert!(err.contains(why), "{why}: {err}");
        assert!(o.stdout.is_empty());
    }
    // Options of a run make no sense with --compare: a usage error.
    let o = run(&[
        "bench",
        "--compare",
        cases[0].0.to_str().unwrap(),
        "--mib",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bench_rejects_bad_arguments() {
    for args in [
        &["bench", "--types", "q9_9"][..],
        &["bench", "--dtype", "f64"][..],
        &["bench", "--mib", "0"][..],
        &["bench", "--runs", "3"][..],
        &["bench", "--rotate-mib", "0"][..],
        &["bench", "--budget", "-1"][..],
        &["bench", "--budget", "inf"][..],
        &["bench", "--compare"][..],
        &["bench", "--kernels", "gemm"][..],
        &["bench", "--kernels", ""][..],
        &["bench", "--kernels", "matvec", "--batch", "9"][..],
        &["bench", "--kernels", "matvec", "--shape", "4096x0"][..],
        &["bench", "--kernels", "matvec", "--shape", "4096"][..],
        &["bench", "--kernels", "matmul", "--matmul-batch", "0"][..],
        &["bench", "--dtype", "none"][..],
        // K must be whole blocks of every format.
        &[
            "bench",
            "--types",
            "q4_k",
            "--kernels",
            "matvec",
            "--shape",
            "96x64",
        ][..],
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
    check_header(&json);
    assert_eq!(json["adapters"].as_array().unwrap().len(), 0);
    assert_eq!(json["results"].as_array().unwrap().len(), 2);
}

#[test]
fn values_for_mib_rounds_to_whole_workgroups() {
    assert_eq!(bench::values_for_mib(1.0), 1 << 18);
    assert_eq!(bench::values_for_mib(0.0), 256);
    assert_eq!(bench::values_for_mib(0.001) % 256, 0);
}

/// `r[key]` is positive and equals `num / den`.
fn ratio(r: &Json, key: &str, num: f64, den: f64) {
    close(positive(r, key, r), num / den, key, r);
}

/// Checks one kernel row of a run on `shape` with a rotation target of `target` bytes.
fn check_kernel_row(r: &Json, (k, n): (u64, u64), target: u64) {
    let f = Format::from_name(r["type"].as_str().unwrap()).unwrap();
    let kernel = r["kernel"].as_str().unwrap();
    assert_eq!((u(r, "k"), u(r, "n")), (k, n), "{r}");
    assert!(r["timing"] == "timestamp" || r["timing"] == "wall", "{r}");
    let batch = u(r, "batch");
    let weight = u(r, "weight_bytes");
    assert_eq!(
        weight,
        k * n / f.block_elems() as u64 * f.block_bytes() as u64,
        "{r}"
    );
    let secs = positive(r, "seconds", r);
    let bytes = u(r, "bytes");
    let gbps = positive(r, "gb_per_s", r);
    close(gbps, bytes as f64 / secs / 1e9, "gb_per_s", r);
    // The reference: the same tensor dequantised to f32, with its rooflines.
    let dequant_bytes = u(r, "dequant_bytes");
    assert_eq!(dequant_bytes, weight + 4 * k * n, "{r}");
    let dequant = positive(r, "dequant_gb_per_s", r);
    close(
        dequant,
        dequant_bytes as f64 / positive(r, "dequant_seconds", r) / 1e9,
        "dequant_gb_per_s",
        r,
    );
    assert!(u(r, "dequant_rotation_pairs") >= 1, "{r}");
    let (copy, shader) = (
        positive(r, "copy_gb_per_s", r),
        positive(r, "shader_copy_gb_per_s", r),
    );
    let pairs = u(r, "rotation_pairs");
    assert!(pairs >= 1, "{r}");
    assert!(u(r, "runs") >= 1, "{r}");
    if kernel == "matmul" {
        for key in ["ratio_to_copy", "ratio_to_shader_copy", "ratio_to_dequant"] {
            assert!(r[key].is_null(), "{key}: {r}");
        }
    } else {
        ratio(r, "ratio_to_copy", gbps, copy);
        ratio(r, "ratio_to_shader_copy", gbps, shader);
        ratio(r, "ratio_to_dequant", gbps, dequant);
        // The rotation rule on the weight's bytes.
        assert!(
            pairs * weight >= target || pairs == rotation::MAX_PAIRS,
            "too few pairs: {r}"
        );
        assert!(pairs == 1 || (pairs - 1) * weight < target, "too many: {r}");
    }
    match kernel {
        "matvec" | "matmul" => {
            assert_eq!(bytes, weight, "{r}");
            let flops = u(r, "flops");
            assert_eq!(flops, 2 * k * n * batch, "{r}");
            ratio(r, "gflops", flops as f64 / 1e9, secs);
        }
        "get_rows" => {
            assert_eq!(bytes, batch * (weight / n + 4 * k), "{r}");
            assert!(r["flops"].is_null() && r["gflops"].is_null(), "{r}");
            assert_eq!(u(r, "rotation_bytes_per_run"), pairs * bytes, "{r}");
        }
        "matvec_id" => {
            // One token, `batch` of the 8 experts of N / 8 rows.
            let experts = gguf_dequant::bench::kernels::MOE_EXPERTS;
            assert_eq!(batch, gguf_dequant::bench::kernels::MOE_SLOTS as u64, "{r}");
            assert_eq!(bytes, weight / experts * batch, "{r}");
            assert_eq!(u(r, "flops"), 2 * k * (n / experts) * batch, "{r}");
            assert_eq!(u(r, "rotation_bytes_per_run"), pairs * bytes, "{r}");
        }
        other => panic!("unknown kernel {other}: {r}"),
    }
    // The kernels one call ran, named by family and type (matmul on CPU adapters: matvecs of
    // 16 columns).
    let variant = r["variant"].as_str().unwrap();
    let family = match kernel {
        "matmul" if variant.starts_with("matvec.") => "matvec",
        k => k,
    };
    assert!(
        variant.starts_with(&format!("{family}.{}.", f.name())),
        "{r}"
    );
    // The CPU side of recording one call: a kept recorder creates nothing in a steady-state
    // step; the one-shot way creates at least a uniform buffer, its bind group and a storage
    // bind group per call.
    assert!(u(r, "recording_dispatches") >= 1, "{r}");
    assert_eq!(u(r, "recording_kept_objects"), 0, "{r}");
    assert!(
        r["recording_one_shot_objects"].as_f64().unwrap() >= 3.0,
        "{r}"
    );
    let kept = positive(r, "recording_kept_us", r);
    positive(r, "recording_one_shot_us", r);
    close(
        positive(r, "recording_share", r),
        kept * 1e-6 * u(r, "recording_dispatches") as f64 / secs,
        "recording_share",
        r,
    );
    if kernel == "matvec" {
        assert_eq!(u(r, "rotation_bytes_per_run"), pairs * weight, "{r}");
    }
    let unfused = ["unfused_dequant_seconds", "unfused_matvec_seconds"];
    if kernel == "matvec" && f != Format::F16 {
        let (d, m) = (positive(r, unfused[0], r), positive(r, unfused[1], r));
        close(
            positive(r, "unfused_seconds", r),
            d + m,
            "unfused_seconds",
            r,
        );
        ratio(r, "fused_speedup", d + m, secs);
        assert!(u(r, "unfused_rotation_pairs") >= 1, "{r}");
    } else {
        for key in unfused.into_iter().chain([
            "unfused_seconds",
            "fused_speedup",
            "unfused_rotation_pairs",
        ]) {
            assert!(r[key].is_null(), "{key}: {r}");
        }
    }
}

/// `--kernels all` on a tiny shape: every kernel row in the JSON with figures that agree with
/// their definitions, in the table and in the chart; `--compare` of it and of a schema 2 report
/// (no kernel rows) prints the kernel tables with the report's own figures.
#[test]
fn bench_kernels_in_table_json_chart_and_compare() {
    const TEST: &str = "bench_kernels_in_table_json_chart_and_compare";
    let dir = tempfile::tempdir().unwrap();
    for backend in BACKENDS {
        if !have(backend, TEST) {
            continue;
        }
        let path = dir.path().join(format!("{backend}-kernels.json"));
        let svg = dir.path().join(format!("{backend}-kernels.svg"));
        let out = bench_into(
            backend,
            &path,
            &[
                "--types",
                "q4_0,f16",
                "--dtype",
                "none",
                "--kernels",
                "all",
                "--shape",
                "256x64",
                "--batch",
                "1,2",
                "--matmul-batch",
                "8",
                "--rows",
                "4",
                "--runs",
                "5",
                "--svg",
                svg.to_str().unwrap(),
            ],
        );
        let json: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        check_header(&json);
        assert_eq!(json["results"], serde_json::json!([]), "--dtype none");
        let rows = json["kernels"].as_array().unwrap();
        let want = [
            ("matvec", 1),
            ("matvec", 2),
            ("matmul", 8),
            ("get_rows", 4),
            ("matvec_id", 2),
        ];
        assert_eq!(rows.len(), 2 * want.len(), "{json}");
        for (t, (kernel, batch)) in ["Q4_0", "F16"]
            .into_iter()
            .flat_map(|t| want.iter().map(move |w| (t, *w)))
        {
            let r = rows
                .iter()
                .find(|r| r["type"] == t && r["kernel"] == kernel && r["batch"] == batch)
                .unwrap_or_else(|| panic!("no {t} {kernel} ×{batch} row: {json}"));
            assert_eq!(r["adapter"], 0, "{r}");
            assert_eq!(r["backend"], backend, "{r}");
            check_kernel_row(r, (256, 64), 1 << 20);
            // The table has the row, with the report's ms.
            let line = format!("{t:<8} {kernel:<9} {:<12} {batch:>5}", "256x64");
            let l = out
                .lines()
                .find(|l| l.starts_with(&line))
                .unwrap_or_else(|| panic!("{line} missing:\n{out}"));
            let ms = format!("{:.3}", r["seconds"].as_f64().unwrap() * 1e3);
            assert!(l.split_whitespace().any(|c| c == ms), "{ms} in {l}");
        }
        for line in [
            "kernels on adapter 0:",
            "matvec on adapter 0: ",
            "kernels: weights [K, N]",
            "recording on adapter 0: kept recorder ",
        ] {
            assert!(out.contains(line), "{line} missing:\n{out}");
        }
        // The adapter's rooflines come from the kernels' references when there is no
        // dequantisation row.
        positive(&json["adapters"][0], "shader_copy_gb_per_s", &json);
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(s.trim_end().ends_with("</svg>"));
        for name in [
            "matvec",
            "matmul",
            "get_rows",
            "matvec_id",
            "GFLOPS",
            "256x64",
            "unfused",
        ] {
            assert!(s.contains(name), "{name} missing from the SVG");
        }

        // A schema 2 report (no kernels) beside it.
        let mut old = json.clone();
        old["schema"] = 2.into();
        old.as_object_mut().unwrap().remove("kernels");
        let old_path = dir.path().join(format!("{backend}-old.json"));
        std::fs::write(&old_path, old.to_string()).unwrap();
        let o = run(&[
            "bench",
            "--compare",
            old_path.to_str().unwrap(),
            path.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let cmp = text(&o.stdout);
        for header in ["A1 GB/s", "A1 GFLOPS"] {
            assert!(cmp.contains(header), "{header} missing:\n{cmp}");
        }
        let q4 = rows
            .iter()
            .find(|r| r["type"] == "Q4_0" && r["kernel"] == "matvec" && r["batch"] == 1)
            .unwrap();
        let line = cmp
            .lines()
            .find(|l| l.starts_with("Q4_0     matvec    256x64           1"))
            .unwrap_or_else(|| panic!("Q4_0 matvec missing:\n{cmp}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        // type kernel shape batch, then A0 (the old report: none) and A1, 4 cells each.
        assert_eq!(cells.len(), 4 + 2 * 4, "{line}");
        assert_eq!(&cells[4..8], ["-"; 4], "{line}");
        let f = |key: &str| format!("{:.2}", q4[key].as_f64().unwrap());
        assert_eq!(
            &cells[8..12],
            [
                f("gb_per_s"),
                f("ratio_to_shader_copy"),
                f("ratio_to_dequant"),
                f("fused_speedup")
            ],
            "{line}"
        );
    }
}

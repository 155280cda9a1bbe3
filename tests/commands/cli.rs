//! The `gguf-dequant` binary as a user runs it: exit codes, one-line errors, outputs read back.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use gguf_dequant::gguf::{GgufFile, GgufWriter, Value};
use gguf_dequant::{DType, Format};

use crate::support::cli::{bin, run, stderr};
use crate::support::codec::cpu;
use crate::support::rng;

/// Deterministic pseudo-random bytes with every f16 scale field kept finite by clearing bit 14 of
/// each byte pair (an f16 with exponent < 16 is finite); good enough for codec plumbing tests.
fn blocks(n: usize, seed: u64) -> Vec<u8> {
    let mut b = rng::bytes(n, seed);
    for x in b.iter_mut().skip(1).step_by(2) {
        *x &= 0x3F;
    }
    b
}

/// A small model: a Q4_0 matrix, a Q8_0 matrix, an F16 vector and an I32 vector.
fn model(dir: &Path) -> PathBuf {
    let path = dir.join("model.gguf");
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", "test")
        .metadata("test.block_count", Value::U32(1))
        .tensor("a.q4_0", vec![64, 3], Format::Q4_0, blocks(6 * 18, 1))
        .tensor("b.q8_0", vec![32, 5], Format::Q8_0, blocks(5 * 34, 2))
        .tensor("c.f16", vec![7], Format::F16, blocks(14, 3))
        .tensor("d.i32", vec![3], Format::I32, blocks(12, 4));
    std::fs::write(&path, w.to_bytes()).unwrap();
    path
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn expected_bytes(file: &GgufFile, name: &str, dtype: DType) -> Vec<u8> {
    let t = file.tensor(name).unwrap();
    cpu(t.format, file.tensor_data(t), dtype)
}

fn assert_one_error_line(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(o));
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "one line expected, got: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(needle), "`{needle}` not in: {err}");
}

/// Files in `dir` other than the ones named.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

#[test]
fn inspect_text_and_json() {
    let dir = tempdir();
    let path = model(dir.path());
    let o = run(&["inspect", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    for needle in [
        "a.q4_0",
        "Q4_0",
        "b.q8_0",
        "general.architecture",
        "[64, 3]",
    ] {
        assert!(text.contains(needle), "`{needle}` missing in:\n{text}");
    }

    let o = run(&["inspect", "--json", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["version"], 3);
    assert_eq!(json["alignment"], 32);
    assert_eq!(json["metadata"]["general.architecture"], "test");
    let t = &json["tensors"][1];
    assert_eq!(t["name"], "b.q8_0");
    assert_eq!(t["type"], "Q8_0");
    assert_eq!(t["type_id"], 8);
    assert_eq!(t["dims"], serde_json::json!([32, 5]));
    assert_eq!(t["n_elements"], 160);
    assert_eq!(t["n_bytes"], 170);
    assert_eq!(t["offset"], 128);
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["inspect"],
        &["frobnicate"],
        &["dequant", "x.gguf"],
        &["inspect", "--bogus", "x"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    let o = run(&["dequant", "x.gguf", "--out", "y.npy", "--dtype", "f64"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn errors_are_one_line_exit_1() {
    let dir = tempdir();
    let missing = dir.path().join("missing.gguf");
    assert_one_error_line(
        &run(&["inspect", missing.to_str().unwrap()]),
        "missing.gguf",
    );

    let bad = dir.path().join("bad.gguf");
    let good = std::fs::read(model(dir.path())).unwrap();
    std::fs::write(&bad, &good[..20]).unwrap();
    let o = run(&["inspect", bad.to_str().unwrap()]);
    assert_one_error_line(&o, "truncated");
    let out = dir.path().join("out.safetensors");
    let o = run(&[
        "dequant",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_one_error_line(&o, "bad.gguf");
    assert!(!out.exists());

    std::fs::write(&bad, b"GGUF\x01\0\0\0").unwrap();
    assert_one_error_line(&run(&["inspect", bad.to_str().unwrap()]), "version 1");
}

#[test]
fn dequant_refusals_leave_no_file() {
    let dir = tempdir();
    let path = model(dir.path());
    let p = path.to_str().unwrap();
    let cases: [(&[&str], &str, &str); 4] = [
        (&["--out"], "out.npy", "exactly one tensor"),
        (
            &["--tensor", "a.q4_0", "--dtype", "bf16", "--out"],
            "out.npy",
            "bfloat16",
        ),
        (&["--tensor", "nope", "--out"], "out.safetensors", "nope"),
        (&["--out"], "out.txt", "extension"),
    ];
    for (args, name, needle) in cases {
        let out = dir.path().join(name);
        let mut all = vec!["dequant", p];
        all.extend_from_slice(args);
        all.push(out.to_str().unwrap());
        assert_one_error_line(&run(&all), needle);
        assert!(!out.exists(), "{name} was written");
    }
    assert!(leftovers(dir.path(), &["model.gguf"]).is_empty());
}

#[test]
fn dequant_outputs_read_back() {
    let dir = tempdir();
    let path = model(dir.path());
    let p = path.to_str().unwrap();
    let file = GgufFile::open(&path).unwrap();

    for dtype in DType::ALL {
        let out = dir.path().join(format!("all.{dtype}.safetensors"));
        let o = run(&[
            "dequant",
            p,
            "--quiet",
            "--dtype",
            dtype.name(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let bytes = std::fs::read(&out).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(st.len(), 4);
        for t in file.tensors() {
            let view = st.tensor(&t.name).unwrap();
            let shape: Vec<usize> = t.dims.iter().rev().map(|&d| d as usize).collect();
            assert_eq!(view.shape(), shape.as_slice(), "{}", t.name);
            assert_eq!(
                view.data(),
                expected_bytes(&file, &t.name, dtype).as_slice(),
                "{}",
                t.name
            );
        }
    }

    let npy = dir.path().join("a.npy");
    let o = run(&[
        "dequant",
        p,
        "--tensor",
        "a.q4_0",
        "--dtype",
        "f16",
        "--out",
        npy.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&npy).unwrap();
    let arr = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(arr.shape(), &[3, 64]);
    assert_eq!(arr.header().dtype().descr(), "'<f2'");
    let data_start = bytes.len() - 3 * 64 * 2;
    assert_eq!(
        &bytes[data_start..],
        expected_bytes(&file, "a.q4_0", DType::F16).as_slice()
    );

    let raw = dir.path().join("b.bin");
    let o = run(&[
        "dequant",
        p,
        "--tensor",
        "b.q8_0",
        "--out",
        raw.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&raw).unwrap(),
        expected_bytes(&file, "b.q8_0", DType::F32)
    );
    assert!(leftovers(
        dir.path(),
        &[
            "model.gguf",
            "all.f32.safetensors",
            "all.f16.safetensors",
            "all.bf16.safetensors",
            "a.npy",
            "b.bin"
        ]
    )
    .is_empty());
}

#[test]
fn killed_dequant_leaves_no_file() {
    let dir = tempdir();
    // 64 Mi values of Q8_0: about 270 MiB of f32 output, far more than can be written before the kill.
    let rows = 2048u64;
    let path = dir.path().join("big.gguf");
    let mut w = GgufWriter::new();
    w.tensor(
        "big",
        vec![32 * 1024, rows],
        Format::Q8_0,
        blocks(1024 * rows as usize * 34, 9),
    );
    std::fs::write(&path, w.to_bytes()).unwrap();
    let out = dir.path().join("big.safetensors");
    let mut child = bin()
        .args([
            "dequant",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(150));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "finished before it could be killed");
    assert!(!out.exists(), "a partial output was left at PATH");
}

#[test]
fn broken_pipe_exits_0() {
    let dir = tempdir();
    // Thousands of tensors: far more output than a pipe buffer holds.
    let path = dir.path().join("many.gguf");
    let mut w = GgufWriter::new();
    for i in 0..3000 {
        w.tensor(format!("t.{i}"), vec![4], Format::F32, vec![0u8; 16]);
    }
    std::fs::write(&path, w.to_bytes()).unwrap();
    for json in [false, true] {
        let mut cmd = bin();
        cmd.arg("inspect");
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "json={json}: {}", stderr(&o));
        assert!(o.stderr.is_empty(), "json={json}: {}", stderr(&o));
    }
}

#[test]
fn inspect_escapes_control_characters_from_the_file() {
    let dir = tempdir();
    let path = dir.path().join("ctl.gguf");
    let mut w = GgufWriter::new();
    w.metadata("evil\nkey\x1b[2J", "v").tensor(
        "t\x1b[31m\r",
        vec![32],
        Format::Q8_0,
        blocks(34, 5),
    );
    std::fs::write(&path, w.to_bytes()).unwrap();
    let o = run(&["inspect", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    assert!(out.contains("evil\\nkey\\u{1b}[2J"), "{out}");
    assert!(out.contains("t\\u{1b}[31m\\r"), "{out}");
}

/// `convert` and `dequant` refuse to write over their own input, however the output names it (the
/// same path, `./x` for `x`, a symbolic link, a hard link), with one error line, and leave the
/// input's bytes as they were.
#[test]
fn output_that_is_the_input_is_refused() {
    let dir = tempdir();
    // A GGUF file that happens to carry the output's extension.
    let input = dir.path().join("model.safetensors");
    std::fs::rename(model(dir.path()), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("model.safetensors", dir.path().join("link.safetensors")).unwrap();
    std::fs::hard_link(&input, dir.path().join("hard.safetensors")).unwrap();
    let mut outs = vec![
        "model.safetensors",
        "./model.safetensors",
        "hard.safetensors",
    ];
    if cfg!(unix) {
        outs.push("link.safetensors");
    }
    let absolute = input.to_str().unwrap();
    for out in outs {
        for (input_arg, args) in [
            (absolute, vec!["convert", absolute, out]),
            (
                "model.safetensors",
                vec!["convert", "model.safetensors", out],
            ),
            (
                "./model.safetensors",
                vec!["dequant", "./model.safetensors", "--out", out],
            ),
            (
                absolute,
                vec!["dequant", absolute, "-o", out, "--backend", "cpu"],
            ),
        ] {
            let o = bin().args(&args).current_dir(dir.path()).output().unwrap();
            assert_one_error_line(&o, "refusing to overwrite");
            assert!(stderr(&o).contains(input_arg), "{args:?}: {}", stderr(&o));
            assert_eq!(
                std::fs::read(&input).unwrap(),
                before,
                "{args:?}: input changed"
            );
        }
    }
    let mut keep = vec!["model.safetensors", "hard.safetensors"];
    if cfg!(unix) {
        keep.push("link.safetensors");
    }
    assert!(leftovers(dir.path(), &keep).is_empty());
    // A symbolic link is still a link to the input, not a file of its own.
    #[cfg(unix)]
    assert!(
        std::fs::symlink_metadata(dir.path().join("link.safetensors"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// Every `--backend` takes the library's backend names, each command only those that make sense
/// for it: `-h` lists exactly those, and any other is a usage error (exit 2).
#[test]
fn backend_subsets_per_command() {
    let decode = "[possible values: auto, vulkan, gl, metal, dx12, cpu]";
    let gpu = "[possible values: auto, vulkan, gl, metal, dx12]";
    let adapters = "[possible values: auto, all, vulkan, gl, metal, dx12]";
    for (command, rest, listed, refused) in [
        ("dequant", &["x.gguf", "-o", "y.bin"][..], decode, "all"),
        ("convert", &["x.gguf", "y.safetensors"][..], decode, "all"),
        ("verify", &["x.gguf"][..], gpu, "cpu"),
        ("load", &["x.gguf"][..], gpu, "all"),
        ("selftest", &[][..], adapters, "cpu"),
        ("bench", &[][..], adapters, "cpu"),
    ] {
        let o = run(&[command, "-h"]);
        let help = String::from_utf8(o.stdout).unwrap();
        assert!(help.contains(listed), "{command}: {help}");
        let mut args = vec![command];
        args.extend_from_slice(rest);
        args.extend_from_slice(&["--backend", refused]);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(listed), "{args:?}: {}", stderr(&o));
    }
}

/// `dequant --glob` (and `convert --glob`) picks tensors as `load --glob` does; it conflicts with
/// `--tensor`, and a glob that matches nothing is one error line. Without a terminal there is no
/// progress bar.
#[test]
fn dequant_and_convert_select_by_glob() {
    let dir = tempdir();
    let path = model(dir.path());
    let p = path.to_str().unwrap();
    let file = GgufFile::open(&path).unwrap();
    let out = dir.path().join("q.safetensors");
    let o = run(&[
        "dequant",
        p,
        "--glob",
        "*.q?_0",
        "--glob",
        "d.*",
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains('\r') && !stderr(&o).contains('\u{1b}'),
        "a progress bar was drawn: {:?}",
        stderr(&o)
    );
    let bytes = std::fs::read(&out).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names = st.names();
    names.sort();
    assert_eq!(names, ["a.q4_0", "b.q8_0", "d.i32"]);
    assert_eq!(
        st.tensor("b.q8_0").unwrap().data(),
        expected_bytes(&file, "b.q8_0", DType::F32).as_slice()
    );

    let conv = dir.path().join("c.safetensors");
    let o = run(&[
        "convert",
        p,
        conv.to_str().unwrap(),
        "--glob",
        "c.*",
        "--json",
        "--backend",
        "cpu",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["tensors"], 1);
    assert_eq!(json["backend"], "cpu");
    let bytes = std::fs::read(&conv).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    assert_eq!(meta.tensors().len(), 1);
    assert_eq!(
        meta.metadata().as_ref().unwrap()["general.architecture"],
        "test"
    );

    let o = run(&[
        "dequant",
        p,
        "--glob",
        "*",
        "--tensor",
        "c.f16",
        "--out",
        "x.safetensors",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let none = dir.path().join("none.safetensors");
    let o = run(&[
        "dequant",
        p,
        "--glob",
        "zzz*",
        "--out",
        none.to_str().unwrap(),
    ]);
    assert_one_error_line(&o, "zzz*");
    assert!(!none.exists());
}

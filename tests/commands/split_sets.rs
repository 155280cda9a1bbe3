//! Every command on a split GGUF set, opened by its first shard, as on the file it was cut from:
//! `inspect` lists the shards, `dequant` / `convert` write the same values, `verify`, `load` and
//! `apply` run on it; a broken set is one `error:` line naming the shard, and no output may
//! overwrite a shard.

use std::path::{Path, PathBuf};

use gguf_dequant::gguf::SplitLimit;
use gguf_dequant::GgufFile;
use serde_json::Value as Json;

use crate::support::cli::{run, stderr, text};
use crate::support::gguf::model_writer;

/// The test model as `whole.gguf` and as a 4-shard set `m-0000k-of-00004.gguf`.
fn set() -> (tempfile::TempDir, PathBuf, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let w = model_writer(8);
    let whole = dir.path().join("whole.gguf");
    std::fs::write(&whole, w.to_bytes()).unwrap();
    let shards = w
        .write_split(&dir.path().join("m.gguf"), SplitLimit::Tensors(3))
        .unwrap();
    assert_eq!(shards.len(), 4);
    (dir, whole, shards)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    text(&o.stdout)
}

#[test]
fn inspect_lists_the_shards() {
    let (_dir, _whole, shards) = set();
    let out = ok(&["inspect", s(&shards[0])]);
    assert!(out.contains("shards:      4 files"), "{out}");
    for p in &shards {
        assert!(out.contains(s(p)), "{out}");
    }
    assert!(out.contains("in shard 4"), "{out}");
    let json: Json = serde_json::from_str(&ok(&["inspect", s(&shards[0]), "--json"])).unwrap();
    let listed: Vec<&str> = json["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    assert_eq!(listed, shards.iter().map(|p| s(p)).collect::<Vec<_>>());
    assert_eq!(json["tensors"].as_array().unwrap().len(), 10);
    assert_eq!(json["tensors"][9]["shard"], 3);
}

#[test]
fn dequant_and_convert_of_a_set_equal_the_file() {
    let (dir, whole, shards) = set();
    for (input, tag) in [(&whole, "whole"), (&shards[0], "set")] {
        let st = dir.path().join(format!("{tag}.safetensors"));
        ok(&["convert", s(input), s(&st), "--backend", "cpu", "-q"]);
        let npy = dir.path().join(format!("{tag}.npy"));
        let args = ["dequant", s(input), "--tensor", "output.weight"];
        ok(&[&args[..], &["--out", s(&npy), "--backend", "cpu", "-q"]].concat());
    }
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    assert_eq!(read("whole.npy"), read("set.npy"));
    let (a, b) = (read("whole.safetensors"), read("set.safetensors"));
    let (a, b) = (
        safetensors::SafeTensors::deserialize(&a).unwrap(),
        safetensors::SafeTensors::deserialize(&b).unwrap(),
    );
    assert_eq!(a.len(), 10);
    for (name, t) in a.tensors() {
        let u = b.tensor(&name).unwrap();
        assert_eq!(
            (t.shape(), t.dtype(), t.data()),
            (u.shape(), u.dtype(), u.data())
        );
    }
}

#[test]
fn broken_sets_are_one_error_line_naming_the_shard() {
    let (dir, _whole, shards) = set();
    std::fs::rename(&shards[2], dir.path().join("moved")).unwrap();
    let npy = dir.path().join("x.npy");
    for args in [
        vec!["inspect", s(&shards[0])],
        vec![
            "dequant",
            s(&shards[0]),
            "--out",
            s(&npy),
            "--backend",
            "cpu",
        ],
        vec!["inspect", s(&shards[1])],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        let want = if args[1] == s(&shards[1]) {
            "m-00002-of-00004.gguf: this is shard 2 of 4"
        } else {
            "m-00003-of-00004.gguf: shard 3 of 4 is missing"
        };
        assert!(err.starts_with("error: ") && err.contains(want), "{err}");
        assert!(!npy.exists());
    }
}

#[test]
fn no_output_overwrites_a_shard() {
    let (_dir, _whole, shards) = set();
    let before = std::fs::read(&shards[1]).unwrap();
    let o = run(&[
        "dequant",
        s(&shards[0]),
        "--tensor",
        "output.weight",
        "--out",
        s(&shards[1].with_extension("npy")),
        "--backend",
        "cpu",
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(shards[1].with_extension("npy")).unwrap();
    // A link with an output's extension to a later shard: still that shard.
    let alias = shards[1].with_file_name("alias.safetensors");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&shards[1], &alias).unwrap();
    #[cfg(not(unix))]
    std::fs::hard_link(&shards[1], &alias).unwrap();
    let o = run(&["convert", s(&shards[0]), s(&alias), "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("refusing to overwrite"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&shards[1]).unwrap(), before);
    GgufFile::open(&shards[0]).unwrap();
}

#[cfg(feature = "gpu")]
#[test]
fn verify_load_and_apply_run_on_a_set() {
    for backend in ["vulkan", "gl"] {
        if !crate::support::cli::have(backend, "verify_load_and_apply_run_on_a_set") {
            continue;
        }
        let (dir, _whole, shards) = set();
        let out = ok(&["verify", s(&shards[0]), "--backend", backend]);
        assert!(out.contains("10 tensors") || out.contains("10/10"), "{out}");
        let json: Json = serde_json::from_str(&ok(&[
            "verify",
            s(&shards[0]),
            "--backend",
            backend,
            "--op",
            "all",
            "--json",
        ]))
        .unwrap();
        assert_eq!(json["ok"], true, "{json}");
        let json: Json = serde_json::from_str(&ok(&[
            "load",
            s(&shards[0]),
            "--backend",
            backend,
            "--dtype",
            "raw",
            "--json",
        ]))
        .unwrap();
        assert_eq!(json["tensors"], 10, "{json}");
        let file = GgufFile::open(&shards[0]).unwrap();
        let total: u64 = file.tensors().iter().map(|t| t.n_bytes).sum();
        assert_eq!(json["bytes_read"], total);
        // apply on a tensor of the last shard: the CPU reference and the GPU agree.
        let x = dir.path().join("x.npy");
        let values: Vec<f32> = (0..256).map(|i| i as f32 / 256.0).collect();
        let npy = crate::apply::npy("<f4", &[256], false, &crate::apply::le_f32(&values));
        std::fs::write(&x, npy).unwrap();
        let (gpu, cpu) = (dir.path().join("gpu.npy"), dir.path().join("cpu.npy"));
        for (out, b) in [(&gpu, backend), (&cpu, "cpu")] {
            ok(&[
                "apply",
                s(&shards[0]),
                "--tensor",
                "output.weight",
                "--op",
                "matvec",
                "--input",
                s(&x),
                "--out",
                s(out),
                "--backend",
                b,
                "-q",
            ]);
        }
        assert_eq!(
            std::fs::metadata(&gpu).unwrap().len(),
            std::fs::metadata(&cpu).unwrap().len()
        );
    }
}

#[cfg(feature = "gpu")]
#[test]
fn bench_decodes_a_sets_own_blocks() {
    if !crate::support::cli::have("vulkan", "bench_decodes_a_sets_own_blocks") {
        return;
    }
    let (_dir, _whole, shards) = set();
    let args = [
        "bench",
        s(&shards[0]),
        "--backend",
        "vulkan",
        "--mib",
        "0.0625",
    ];
    let more = [
        "--runs",
        "5",
        "--dtype",
        "f16",
        "--no-cpu",
        "--rotate-mib",
        "2",
        "--json",
        "-",
        "-q",
    ];
    let json: Json = serde_json::from_str(&ok(&[&args[..], &more[..]].concat())).unwrap();
    assert_eq!(json["model"], s(&shards[0]));
    let mut types: Vec<&str> = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    types.sort();
    assert_eq!(types, ["F16", "IQ4_XS", "Q4_0", "Q4_K", "Q6_K", "Q8_0"]);
    let o = run(&[
        "bench",
        s(&shards[0]),
        "--types",
        "Q2_K",
        "--backend",
        "vulkan",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("holds no Q2_K tensor"),
        "{}",
        stderr(&o)
    );
}

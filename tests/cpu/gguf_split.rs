//! Split GGUF sets: written by our writer and by gguf-py's own `GGUFWriter`, opened by their
//! first shard as one model (shards listed as gguf-py lists them, every tensor's bytes and decoded
//! values as gguf-py reads them), and hostile sets rejected with a typed error naming the shard.

use std::path::{Path, PathBuf};
use std::process::Command;

use gguf_dequant::gguf::{GgufWriter, SplitError, SplitLimit, Value};
use gguf_dequant::{DType, Error, Format, GgufFile};
use sha2::{Digest, Sha256};

use crate::support;
use crate::support::codec::cpu;
use crate::support::gguf::model_writer;

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// The set's tensors are the whole model's: same order, dims, format and bytes.
fn assert_same_model(set: &GgufFile, whole: &GgufFile) {
    assert_eq!(set.tensors().len(), whole.tensors().len());
    for (a, b) in set.tensors().iter().zip(whole.tensors()) {
        assert_eq!((&a.name, &a.dims, a.format), (&b.name, &b.dims, b.format));
        assert_eq!(set.tensor_data(a), whole.tensor_data(b), "{}", a.name);
        assert_eq!(set.tensor(&a.name).map(|t| t.shard), Some(a.shard));
    }
    assert_eq!(set.get("general.name"), whole.get("general.name"));
}

#[test]
fn writer_split_sets_open_as_one_model() {
    let dir = tempfile::tempdir().unwrap();
    let w = model_writer(1);
    let whole = support::gguf::save(&w, &dir.path().join("whole.gguf"));
    for (limit, shards) in [
        (SplitLimit::Tensors(4), 3),
        (SplitLimit::Tensors(1), 10),
        (SplitLimit::Bytes(2000), 4),
    ] {
        let sub = dir
            .path()
            .join(format!("{limit:?}").replace(['(', ')'], ""));
        std::fs::create_dir(&sub).unwrap();
        let paths = w.write_split(&sub.join("m.gguf"), limit).unwrap();
        assert_eq!(paths.len(), shards, "{limit:?}");
        assert_eq!(name(&paths[0]), format!("m-00001-of-{shards:05}.gguf"));
        let set = GgufFile::open(&paths[0]).unwrap();
        assert!(set.is_split());
        assert_eq!(set.paths().collect::<Vec<_>>(), paths);
        assert_same_model(&set, &whole);
        assert_eq!(set.get("split.count"), Some(&Value::U16(shards as u16)));
        for (k, s) in set.shards().iter().enumerate() {
            assert_eq!(s.index(), k);
            assert!(s.header().tensors.iter().all(|t| t.shard == k));
        }
    }
    // One shard is the model as it is.
    let one = dir.path().join("one.gguf");
    let paths = w.write_split(&one, SplitLimit::Tensors(100)).unwrap();
    assert_eq!(paths, std::slice::from_ref(&one));
    let file = GgufFile::open(&one).unwrap();
    assert!(!file.is_split() && file.get("split.count").is_none());
    assert_same_model(&file, &whole);
}

const GGUF_PY_SPLIT: &str = r#"
import hashlib, json, sys
from pathlib import Path
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
out_dir, mode = Path(sys.argv[1]), sys.argv[2]
kw = {"tensors": dict(split_max_tensors=3), "size": dict(split_max_size=3000),
      "small": dict(split_max_tensors=4, small_first_shard=True)}[mode]
path = out_dir / "py.gguf"
w = gguf.GGUFWriter(path, "llama", **kw)
w.add_name("gguf-py split")
w.add_block_count(3)
rng = np.random.default_rng(7)
for b in range(3):
    w.add_tensor(f"blk.{b}.attn_q.weight", rng.standard_normal((4, 64), dtype=np.float32))
    q = gguf.quants.quantize(rng.standard_normal((2, 64), dtype=np.float32), T.Q8_0)
    w.add_tensor(f"blk.{b}.ffn_up.weight", q, raw_dtype=T.Q8_0)
    w.add_tensor(f"blk.{b}.norm.weight", rng.standard_normal(64).astype(np.float16))
w.add_tensor("output.weight", gguf.quants.quantize(rng.standard_normal((3, 32), dtype=np.float32), T.BF16), raw_dtype=T.BF16)
shards = [str(p) for p in w.format_shard_names(path)]
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
tensors = {}
for k, s in enumerate(shards):
    for t in gguf.GGUFReader(s).tensors:
        raw = np.ascontiguousarray(t.data).tobytes()
        values = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        tensors[t.name] = [k, hashlib.sha256(raw).hexdigest(), hashlib.sha256(values.tobytes()).hexdigest()]
json.dump({"shards": shards, "tensors": tensors}, sys.stdout)
"#;

#[derive(serde::Deserialize)]
struct PySet {
    shards: Vec<PathBuf>,
    tensors: std::collections::BTreeMap<String, (usize, String, String)>,
}

fn sha(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

#[test]
fn gguf_py_split_sets_open_as_gguf_py_reads_them() {
    const TEST: &str = "gguf_py_split_sets_open_as_gguf_py_reads_them";
    let Some(python) = support::python(TEST) else {
        return;
    };
    for mode in ["tensors", "size", "small"] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(&python)
            .args(["-c", GGUF_PY_SPLIT])
            .arg(dir.path())
            .arg(mode)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let py: PySet = serde_json::from_slice(&out.stdout).unwrap();
        assert!(py.shards.len() > 1, "{mode}: gguf-py wrote one file");
        let set = GgufFile::open(&py.shards[0]).unwrap();
        assert_eq!(set.paths().collect::<Vec<_>>(), py.shards, "{mode}");
        assert_eq!(set.tensors().len(), py.tensors.len(), "{mode}");
        if mode == "small" {
            assert!(set.shards()[0].header().tensors.is_empty());
        }
        for t in set.tensors() {
            let (shard, raw, values) = &py.tensors[&t.name];
            assert_eq!(t.shard, *shard, "{mode} {}", t.name);
            assert_eq!(sha(set.tensor_data(t)), *raw, "{mode} {}", t.name);
            let decoded = cpu(t.format, set.tensor_data(t), DType::F32);
            assert_eq!(sha(&decoded), *values, "{mode} {} ({})", t.name, t.format);
        }
        let formats: std::collections::BTreeSet<Format> =
            set.tensors().iter().map(|t| t.format).collect();
        assert_eq!(formats.len(), 4, "{mode}: {formats:?}");
    }
}

// ---- Hostile sets ------------------------------------------------------------------------------

/// A 3-shard set of the test model in a new directory: (dir, shard paths).
fn set_of_three() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let paths = model_writer(5)
        .write_split(&dir.path().join("m.gguf"), SplitLimit::Tensors(4))
        .unwrap();
    assert_eq!(paths.len(), 3);
    (dir, paths)
}

/// Opening `open` fails with a split error at `shard` matching `want`; the message is one line
/// naming the shard's file.
fn rejected(open: &Path, shard: &Path, want: impl Fn(&SplitError) -> bool) {
    match GgufFile::open(open) {
        Err(e @ Error::Split { .. }) => {
            let Error::Split { path, source } = &e else {
                unreachable!()
            };
            assert_eq!(path, shard, "{e}");
            assert!(want(source), "{e}");
            let msg = e.to_string();
            assert!(!msg.contains('\n') && msg.contains(&name(shard)), "{msg}");
            assert!(e.hint().is_some());
        }
        other => panic!(
            "expected a split error at {}, got {other:?}",
            shard.display()
        ),
    }
}

/// A shard `k` (0-based) of `count` holding `tensors`, with the split keys given.
fn shard_writer(k: u16, count: u16, total: i32, tensors: &[&str]) -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    w.metadata("split.no", Value::U16(k))
        .metadata("split.count", Value::U16(count))
        .metadata("split.tensors.count", Value::I32(total));
    for (i, t) in tensors.iter().enumerate() {
        let f = Format::Q8_0;
        w.tensor(*t, vec![32], f, support::rng::random_blocks(f, 1, i as u64));
    }
    w
}

#[test]
fn missing_extra_and_duplicated_shards_are_rejected() {
    let (_dir, p) = set_of_three();
    std::fs::rename(&p[1], p[1].with_extension("bak")).unwrap();
    rejected(&p[0], &p[1], |e| {
        matches!(e, SplitError::Missing { no: 2, count: 3 })
    });
    std::fs::rename(p[1].with_extension("bak"), &p[1]).unwrap();
    GgufFile::open(&p[0]).unwrap();

    // A file beside the set named like one of its shards (a leftover of another split).
    for extra in ["m-00004-of-00003.gguf", "m-00001-of-00002.gguf"] {
        let x = p[0].with_file_name(extra);
        std::fs::copy(&p[2], &x).unwrap();
        rejected(&p[0], &x, |e| matches!(e, SplitError::Extra { count: 3 }));
        std::fs::remove_file(&x).unwrap();
    }

    // Shard 2 copied over shard 3: its split.no says where it belongs.
    let third = std::fs::read(&p[2]).unwrap();
    std::fs::copy(&p[1], &p[2]).unwrap();
    rejected(&p[0], &p[2], |e| {
        matches!(
            e,
            SplitError::Number {
                found: 1,
                expected: 2
            }
        )
    });
    std::fs::write(&p[2], &third).unwrap();

    // A later shard opened first.
    rejected(
        &p[1],
        &p[1],
        |e| matches!(e, SplitError::NotFirst { no: 2, count: 3, first, .. } if first == "m-00001-of-00003.gguf"),
    );

    // The first shard under another name: the others cannot be found.
    let renamed = p[0].with_file_name("model.gguf");
    std::fs::copy(&p[0], &renamed).unwrap();
    rejected(&renamed, &renamed, |e| {
        matches!(e, SplitError::Name { count: 3 })
    });

    // A shard that is not valid GGUF on its own: the reader's error, naming that shard.
    std::fs::write(&p[2], &third[..third.len() / 2]).unwrap();
    match GgufFile::open(&p[0]) {
        Err(Error::Gguf { path, .. }) => assert_eq!(path, p[2]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn inconsistent_split_keys_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let p: Vec<PathBuf> = (1..=3)
        .map(|k| dir.path().join(format!("s-{k:05}-of-00003.gguf")))
        .collect();
    let write = |k: usize, w: GgufWriter<'_>| std::fs::write(&p[k], w.to_bytes()).unwrap();
    let good = |k: u16| shard_writer(k, 3, 3, &[["a", "b", "c"][k as usize]]);
    for k in 0..3 {
        write(k as usize, good(k));
    }
    let set = GgufFile::open(&p[0]).unwrap();
    assert_eq!(set.tensors().len(), 3);

    write(1, shard_writer(1, 4, 3, &["b"]));
    rejected(&p[0], &p[1], |e| {
        matches!(
            e,
            SplitError::Count {
                found: 4,
                expected: 3
            }
        )
    });
    write(1, shard_writer(1, 3, 5, &["b"]));
    rejected(&p[0], &p[1], |e| {
        matches!(
            e,
            SplitError::TensorsCountMismatch {
                found: 5,
                expected: 3
            }
        )
    });
    write(1, good(1));

    // A tensor in two shards.
    write(2, shard_writer(2, 3, 3, &["a"]));
    rejected(
        &p[0],
        &p[2],
        |e| matches!(e, SplitError::DuplicateTensor { name, other: 1 } if name == "a"),
    );
    // Fewer tensors than split.tensors.count says (every shard agrees on the wrong count).
    for k in 0..3u16 {
        let names: &[&str] = if k == 2 {
            &[]
        } else {
            &[["a", "b"][k as usize]]
        };
        write(k as usize, shard_writer(k, 3, 3, names));
    }
    rejected(&p[0], &p[0], |e| {
        matches!(
            e,
            SplitError::TensorsCount {
                found: 2,
                declared: 3,
                ..
            }
        )
    });

    // A later shard without the split keys; split keys of the wrong type or range.
    for k in 0..3u16 {
        write(k as usize, good(k));
    }
    let mut plain = GgufWriter::new();
    plain.tensor("c", vec![32], Format::F32, vec![0u8; 128]);
    write(2, plain);
    rejected(&p[0], &p[2], |e| matches!(e, SplitError::MissingKey { .. }));
    let mut bad = GgufWriter::new();
    bad.metadata("split.no", Value::U16(0))
        .metadata("split.count", "three")
        .metadata("split.tensors.count", Value::I32(3));
    write(0, bad);
    rejected(&p[0], &p[0], |e| {
        matches!(
            e,
            SplitError::KeyType {
                key: "split.count",
                ..
            }
        )
    });
    let mut neg = GgufWriter::new();
    neg.metadata("split.no", Value::U16(0))
        .metadata("split.count", Value::U16(3))
        .metadata("split.tensors.count", Value::I32(-1));
    write(0, neg);
    rejected(&p[0], &p[0], |e| {
        matches!(
            e,
            SplitError::KeyType {
                key: "split.tensors.count",
                ..
            }
        )
    });
    let mut zero = GgufWriter::new();
    zero.metadata("split.no", Value::U16(0))
        .metadata("split.count", Value::U16(0))
        .metadata("split.tensors.count", Value::I32(0));
    write(0, zero);
    rejected(&p[0], &p[0], |e| matches!(e, SplitError::ZeroCount));
}

//! `gguf-dequant inspect --json` and `gguf-dequant inspect` on a writer-built file.

use gguf_dequant::gguf::{Array, GgufFile, GgufString, GgufWriter, Value};
use gguf_dequant::Format;
use serde_json::json;

use crate::support::cli::{run, stderr};
use crate::support::gguf::temp_file;

/// `gguf-dequant inspect ARGS FILE`'s stdout.
fn inspect(args: &[&str], file: &GgufFile) -> Vec<u8> {
    let mut all = vec!["inspect"];
    all.extend_from_slice(args);
    all.push(file.path().to_str().unwrap());
    let o = run(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    o.stdout
}

fn sample() -> (tempfile::TempDir, GgufFile) {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", "llama")
        .metadata("general.name", GgufString::new(vec![b'a', 0xFF, b'b']))
        .metadata("u8", 7u8)
        .metadata("u64", u64::MAX)
        .metadata("i64", i64::MIN)
        .metadata("f32", 0.1f32)
        .metadata("f64", 2.5f64)
        .metadata("nan", f32::NAN)
        .metadata("inf", f64::NEG_INFINITY)
        .metadata("flag", true)
        .metadata("short", Value::Array(Array::I32(vec![1, -2, 3])))
        .metadata(
            "tokens",
            Value::Array(Array::String(
                (0..100).map(|i| format!("t{i}").into()).collect(),
            )),
        )
        .metadata("exactly64", Value::Array(Array::U8(vec![0; 64])))
        .metadata(
            "nested",
            Value::Array(Array::Array(vec![
                Array::Bool(vec![true]),
                Array::F32((0..65).map(|i| i as f32).collect()),
            ])),
        )
        .metadata("chat", "x".repeat(100))
        .tensor(
            "token_embd.weight",
            vec![32, 2],
            Format::Q8_0,
            vec![0u8; 68],
        )
        .tensor("output_norm.weight", vec![4], Format::F32, vec![0u8; 16]);
    temp_file(&w, "sample.gguf")
}

#[test]
fn to_json_is_exact() {
    let (_dir, file) = sample();
    let data_offset = file.shards()[0].data_offset();
    assert_eq!(data_offset, 2080);
    let expected = json!({
        "version": 3,
        "alignment": 32,
        "data_offset": 2080,
        "shards": [{"path": file.path().to_string_lossy(), "bytes": 2080 + 128, "tensors": 2,
                    "data_offset": 2080}],
        "metadata": {
            "general.architecture": "llama",
            "general.name": "a\u{FFFD}b",
            "u8": 7,
            "u64": 18446744073709551615u64,
            "i64": -9223372036854775808i64,
            "f32": 0.1,
            "f64": 2.5,
            "nan": "NaN",
            "inf": "-inf",
            "flag": true,
            "short": [1, -2, 3],
            "tokens": {"array_of": "string", "len": 100, "head": ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"]},
            "exactly64": vec![0; 64],
            "nested": [[true], {"array_of": "f32", "len": 65, "head": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]}],
            "chat": "x".repeat(100),
        },
        "tensors": [
            {"name": "token_embd.weight", "type": "Q8_0", "type_id": 8, "dims": [32, 2],
             "n_elements": 64, "n_bytes": 68, "offset": 0, "shard": 0},
            {"name": "output_norm.weight", "type": "F32", "type_id": 0, "dims": [4],
             "n_elements": 4, "n_bytes": 16, "offset": 96, "shard": 0},
        ],
    });
    let got: serde_json::Value = serde_json::from_slice(&inspect(&["--json"], &file)).unwrap();
    assert_eq!(
        got,
        expected,
        "{}",
        serde_json::to_string_pretty(&got).unwrap()
    );
    // Metadata keeps file order.
    let keys: Vec<&String> = got["metadata"].as_object().unwrap().keys().collect();
    assert_eq!(keys[0], "general.architecture");
    assert_eq!(keys[14], "chat");
}

#[test]
fn write_text_summarises() {
    let (_dir, file) = sample();
    let text = String::from_utf8(inspect(&[], &file)).unwrap();
    for needle in [
        "version:     3",
        "tensors:     2",
        "metadata:    15 keys",
        "alignment:   32",
        "data offset: 2080",
        "[string; 100]",
        "\"t0\", \"t1\"",
        "… 92 more",
        "… (100 bytes)",
        "\"a\u{FFFD}b\"",
        "  tokens                [string; 100]  [\"t0\",",
        "  u8                    u8             7",
        "total: 2 tensors, 68 elements, 84 bytes (F32: 16 bytes in 1, Q8_0: 68 bytes in 1)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // The tensor table's columns line up: every row puts `type` at the same column.
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "tensors:")
        .skip(1)
        .take(3)
        .collect();
    assert!(rows[0].trim_start().starts_with("name"), "{text}");
    let col = |l: &str, w: &str| l.find(w).unwrap();
    assert_eq!(col(rows[0], "type"), col(rows[1], "Q8_0"));
    assert_eq!(col(rows[0], "type"), col(rows[2], "F32"));
    // Numbers are right-aligned: every row ends at the same column.
    assert_eq!(rows[0].len(), rows[1].len());
    assert_eq!(rows[1].len(), rows[2].len());
}

//! Writer → reader round trips: every format, 1–4 dims, every metadata value type, several
//! alignments, both versions; through `parse` and through `GgufFile::open` on a real file.

use gguf_dequant::gguf::{
    parse, Array, GgufFile, GgufString, GgufWriter, Header, TensorInfo, Value, ValueType,
};
use gguf_dequant::{Error, Format};

use crate::support::rng;

/// Shapes with 1 to 4 dims whose ne0 is a whole number of blocks.
fn shapes(f: Format) -> Vec<Vec<u64>> {
    let b = f.block_elems() as u64;
    vec![
        vec![b],
        vec![3 * b],
        vec![2 * b, 3],
        vec![b, 2, 3],
        vec![b, 1, 2, 2],
    ]
}

struct Expect {
    name: String,
    dims: Vec<u64>,
    format: Format,
    bytes: Vec<u8>,
}

fn every_format_tensors() -> Vec<Expect> {
    let mut out = Vec::new();
    for (fi, &f) in Format::ALL.iter().enumerate() {
        for (si, dims) in shapes(f).into_iter().enumerate() {
            let n: u64 = dims.iter().product();
            let n_bytes = f.bytes_for(n).unwrap() as usize;
            out.push(Expect {
                name: format!("t.{}.{si}", f.name().to_lowercase()),
                dims,
                format: f,
                bytes: rng::bytes(n_bytes, (fi * 16 + si) as u64),
            });
        }
    }
    out
}

fn check_tensors(h: &Header, expect: &[Expect], data: impl Fn(&TensorInfo) -> Vec<u8>) {
    assert_eq!(h.tensors.len(), expect.len());
    for (t, e) in h.tensors.iter().zip(expect) {
        assert_eq!(t.name, e.name);
        assert_eq!(t.dims, e.dims);
        assert_eq!(t.format, e.format);
        assert_eq!(t.n_elements, e.dims.iter().product::<u64>());
        assert_eq!(t.n_bytes, e.bytes.len() as u64, "{}", t.name);
        assert_eq!(t.offset % h.alignment, 0, "{}", t.name);
        assert_eq!(data(t), e.bytes, "{}", t.name);
    }
}

#[test]
fn every_format_every_rank_round_trips() {
    let expect = every_format_tensors();
    for version in [2, 3] {
        for alignment in [1u64, 8, 32, 64, 4096] {
            let mut w = GgufWriter::new();
            w.version(version).metadata("general.name", "round trip");
            if alignment != 32 {
                w.alignment(alignment);
            }
            for e in &expect {
                w.tensor(
                    e.name.as_str(),
                    e.dims.clone(),
                    e.format,
                    e.bytes.as_slice(),
                );
            }
            let bytes = w.to_bytes();
            let h = parse(&bytes).unwrap_or_else(|e| panic!("v{version} align {alignment}: {e}"));
            assert_eq!(h.version, version);
            assert_eq!(h.alignment, alignment);
            assert_eq!(h.data_offset % alignment, 0);
            check_tensors(&h, &expect, |t| {
                let s = (h.data_offset + t.offset) as usize;
                bytes[s..s + t.n_bytes as usize].to_vec()
            });
        }
    }
}

#[test]
fn open_maps_and_slices_tensor_data() {
    let expect = every_format_tensors();
    let mut w = GgufWriter::new();
    w.alignment(64).metadata("general.architecture", "test");
    for e in &expect {
        w.tensor(e.name.as_str(), e.dims.clone(), e.format, e.bytes.clone());
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.gguf");
    let mut f = std::fs::File::create(&path).unwrap();
    w.write_to(&mut f).unwrap();
    drop(f);

    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.path(), path.as_path());
    assert_eq!(file.version(), 3);
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.shards()[0].data_offset() % 64, 0);
    assert_eq!(file.shards()[0].header().tensors.len(), expect.len());
    assert_eq!(
        file.get("general.architecture").and_then(Value::as_str),
        Some("test")
    );
    assert_eq!(file.get("general.alignment"), Some(&Value::U32(64)));
    assert!(file.get("missing").is_none());
    check_tensors(file.shards()[0].header(), &expect, |t| {
        file.tensor_data(t).to_vec()
    });
    for e in &expect {
        let t = file.tensor(&e.name).unwrap();
        assert_eq!(t.name, e.name);
        assert_eq!(file.tensor_data(t), e.bytes.as_slice());
    }
    assert!(file.tensor("nope").is_none());
    assert_eq!(file.tensors().len(), expect.len());
    assert_eq!(file.metadata().len(), 2);

    // An info that does not belong to this file gets an empty slice, not a panic.
    let mut foreign = file.tensors()[0].clone();
    foreign.offset = u64::MAX - 7;
    assert!(file.tensor_data(&foreign).is_empty());
}

fn every_value() -> Vec<(String, Value)> {
    let non_utf8 = GgufString::new(vec![0xE2, 0x96, b'x', 0xFF]);
    let nested = Array::Array(vec![
        Array::U8(vec![1, 2, 3]),
        Array::String(vec!["a".into(), non_utf8.clone()]),
        Array::Array(vec![Array::I64(vec![i64::MIN, -1]), Array::Bool(vec![])]),
        Array::F64(vec![]),
    ]);
    // Nested as deep as the reader allows.
    let mut deep = Array::U32(vec![7]);
    for _ in 1..gguf_dequant::gguf::MAX_ARRAY_DEPTH {
        deep = Array::Array(vec![deep]);
    }
    vec![
        ("v.u8".into(), Value::U8(255)),
        ("v.i8".into(), Value::I8(-128)),
        ("v.u16".into(), Value::U16(65535)),
        ("v.i16".into(), Value::I16(-32768)),
        ("v.u32".into(), Value::U32(u32::MAX)),
        ("v.i32".into(), Value::I32(i32::MIN)),
        ("v.u64".into(), Value::U64(u64::MAX)),
        ("v.i64".into(), Value::I64(i64::MIN)),
        ("v.f32".into(), Value::F32(-1.5e-39)),
        ("v.f64".into(), Value::F64(f64::MAX)),
        ("v.f32.inf".into(), Value::F32(f32::INFINITY)),
        ("v.bool.t".into(), Value::Bool(true)),
        ("v.bool.f".into(), Value::Bool(false)),
        ("v.str".into(), Value::from("héllo")),
        ("v.str.empty".into(), Value::from("")),
        ("v.str.non_utf8".into(), Value::String(non_utf8.clone())),
        ("a.u8".into(), Value::Array(Array::U8(vec![0, 1, 255]))),
        ("a.i8".into(), Value::Array(Array::I8(vec![-1, 2]))),
        ("a.u16".into(), Value::Array(Array::U16(vec![1, 65535]))),
        ("a.i16".into(), Value::Array(Array::I16(vec![-3, 4]))),
        ("a.u32".into(), Value::Array(Array::U32(vec![5, 6, 7]))),
        (
            "a.i32".into(),
            Value::Array(Array::I32((-100..100).collect())),
        ),
        ("a.u64".into(), Value::Array(Array::U64(vec![u64::MAX]))),
        ("a.i64".into(), Value::Array(Array::I64(vec![i64::MAX, 0]))),
        ("a.f32".into(), Value::Array(Array::F32(vec![0.5, -0.0]))),
        ("a.f64".into(), Value::Array(Array::F64(vec![1e300]))),
        (
            "a.bool".into(),
            Value::Array(Array::Bool(vec![true, false, true])),
        ),
        (
            "a.string".into(),
            Value::Array(Array::String(vec!["".into(), "tok".into(), non_utf8])),
        ),
        ("a.empty".into(), Value::Array(Array::U8(vec![]))),
        ("a.nested".into(), Value::Array(nested)),
        ("a.deep".into(), Value::Array(deep)),
    ]
}

#[test]
fn every_metadata_type_round_trips() {
    let values = every_value();
    // Every value type and every array element type is covered.
    for ty in ValueType::ALL {
        assert!(values.iter().any(|(_, v)| v.value_type() == ty), "{ty}");
        if ty != ValueType::Array {
            assert!(
                values
                    .iter()
                    .any(|(_, v)| v.as_array().is_some_and(|a| a.value_type() == ty)),
                "array of {ty}"
            );
        }
    }
    for version in [2, 3] {
        let mut w = GgufWriter::new();
        w.version(version);
        for (k, v) in &values {
            w.metadata(k.as_str(), v.clone());
        }
        w.tensor("x", vec![4], Format::F32, vec![0u8; 16]);
        let h = parse(&w.to_bytes()).unwrap();
        assert_eq!(h.metadata, values);
        assert_eq!(h.get("v.str").and_then(Value::as_str), Some("héllo"));
        let s = h
            .get("v.str.non_utf8")
            .and_then(Value::as_gguf_string)
            .unwrap();
        assert_eq!(s.as_bytes(), &[0xE2, 0x96, b'x', 0xFF]);
        assert!(s.as_str().is_none());
        assert_eq!(s.to_string_lossy(), "\u{FFFD}x\u{FFFD}");
        let a = h.get("a.i32").and_then(Value::as_array).unwrap();
        assert_eq!(a.len(), 200);
        assert_eq!(a.value_type(), ValueType::I32);
        assert_eq!(a.get(0), Some(Value::I32(-100)));
        assert_eq!(a.iter().last(), Some(Value::I32(99)));
        assert_eq!(h.get("v.u64").and_then(Value::as_u64), Some(u64::MAX));
        assert_eq!(h.get("v.i8").and_then(Value::as_i64), Some(-128));
    }
}

#[test]
fn value_type_names_and_ids() {
    let names: Vec<&str> = ValueType::ALL.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64",
            "f64"
        ]
    );
    for (i, t) in ValueType::ALL.iter().enumerate() {
        assert_eq!(t.id(), i as u32);
        assert_eq!(ValueType::from_id(i as u32), Some(*t));
    }
    assert_eq!(ValueType::from_id(13), None);
}

#[test]
fn empty_file_and_header_only() {
    let bytes = GgufWriter::new().to_bytes();
    assert_eq!(bytes.len(), 32);
    let h = parse(&bytes).unwrap();
    assert_eq!((h.version, h.alignment, h.data_offset), (3, 32, 32));
    assert!(h.metadata.is_empty() && h.tensors.is_empty());
    // Without the padding after the header: still a valid, empty file.
    assert!(parse(&bytes[..24]).is_ok());
}

#[test]
fn writer_pads_with_zeros_and_computes_offsets() {
    let mut w = GgufWriter::new();
    w.tensor("a", vec![3], Format::I8, vec![1u8, 2, 3]).tensor(
        "b",
        vec![1],
        Format::F32,
        vec![9u8; 4],
    );
    let bytes = w.to_bytes();
    let h = parse(&bytes).unwrap();
    assert_eq!(h.tensors[0].offset, 0);
    assert_eq!(h.tensors[1].offset, 32);
    let d = h.data_offset as usize;
    assert!(bytes[24..d].iter().rev().take_while(|&&b| b == 0).count() > 0 || d == 24);
    assert_eq!(&bytes[d..d + 3], &[1, 2, 3]);
    assert!(bytes[d + 3..d + 32].iter().all(|&b| b == 0));
    assert_eq!(bytes.len(), d + 64);
    assert_eq!(bytes[d + 32..d + 36], [9; 4]);
}

#[test]
fn open_reports_io_and_gguf_errors_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.gguf");
    match GgufFile::open(&missing) {
        Err(Error::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("{other:?}"),
    }
    let bad = dir.path().join("bad.gguf");
    std::fs::write(&bad, b"GGML\x03\0\0\0").unwrap();
    match GgufFile::open(&bad) {
        Err(e @ Error::Gguf { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("bad.gguf") && msg.contains("magic"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        GgufFile::open(&empty),
        Err(Error::Gguf { .. }) | Err(Error::Io { .. })
    ));
}

#[test]
fn gguf_file_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<GgufFile>();
    assert_send_sync::<Header>();
}

//! Writes the seed corpora: `gen_seeds [MODEL.gguf]...` fills `fuzz/corpus/parse/`,
//! `fuzz/corpus/codecs/` and `fuzz/corpus/npy/` (git-ignored) with
//!
//! * the first 64 KiB of each model given (real metadata layouts: keys, tokenizer arrays);
//! * each model's header re-written small: its metadata with arrays cut to 8 items, and up to 8 of
//!   its tensors shrunk to one row of one or two blocks of their real bytes;
//! * writer-built files: one tensor of every format, every metadata value type, nested arrays;
//! * for the codec target, format-index byte + up to 4 blocks of real tensor bytes per format
//!   found in the models, and pseudo-random blocks for every format;
//! * for the `.npy` target, files of every version, several dtypes, shapes and both orders, and
//!   broken ones (truncated, short data, bad magic or version, hostile shapes, structured dtypes).
//!
//! Deterministic: the same models give the same seeds.

use std::fs;
use std::path::{Path, PathBuf};

use gguf_dequant::gguf::{Array, GgufWriter, Value};
use gguf_dequant::{Format, GgufFile};

const HEAD: usize = 64 * 1024;

fn cut(a: &Array, n: usize) -> Array {
    fn c<T: Clone>(v: &[T], n: usize) -> Vec<T> {
        v[..v.len().min(n)].to_vec()
    }
    match a {
        Array::U8(v) => Array::U8(c(v, n)),
        Array::I8(v) => Array::I8(c(v, n)),
        Array::U16(v) => Array::U16(c(v, n)),
        Array::I16(v) => Array::I16(c(v, n)),
        Array::U32(v) => Array::U32(c(v, n)),
        Array::I32(v) => Array::I32(c(v, n)),
        Array::U64(v) => Array::U64(c(v, n)),
        Array::I64(v) => Array::I64(c(v, n)),
        Array::F32(v) => Array::F32(c(v, n)),
        Array::F64(v) => Array::F64(c(v, n)),
        Array::Bool(v) => Array::Bool(c(v, n)),
        Array::String(v) => Array::String(c(v, n)),
        Array::Array(v) => Array::Array(v.iter().take(n).map(|x| cut(x, n)).collect()),
    }
}

/// A `.npy` file of format version `major` (1, 2 or 3): the header dict given, padded with spaces
/// and a newline to a multiple of 64 bytes as NumPy does, then `data`.
fn npy(major: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let preamble = if major == 1 { 10 } else { 12 };
    let mut header = dict.to_string();
    while !(preamble + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY".to_vec();
    b.extend_from_slice(&[major, 0]);
    if major == 1 {
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    b.extend_from_slice(header.as_bytes());
    b.extend_from_slice(data);
    b
}

/// The `.npy` seeds: (name, bytes).
fn npy_seeds() -> Vec<(String, Vec<u8>)> {
    let dict = |descr: &str, fortran: bool, shape: &str| {
        let order = if fortran { "True" } else { "False" };
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}")
    };
    let f32s = |n: usize, big: bool| -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                let v = i as f32 * 0.5 - 1.0;
                if big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                }
            })
            .collect()
    };
    let mut seeds = vec![
        // Valid: what NumPy writes, several dtypes, shapes, orders and versions.
        (
            "f32-2x3",
            npy(1, &dict("<f4", false, "(2, 3)"), &f32s(6, false)),
        ),
        (
            "f32-2x3-fortran-be",
            npy(1, &dict(">f4", true, "(2, 3)"), &f32s(6, true)),
        ),
        (
            "f32-2x3x4-fortran",
            npy(1, &dict("<f4", true, "(2, 3, 4)"), &f32s(24, false)),
        ),
        (
            "f32-1d-v2",
            npy(2, &dict("<f4", false, "(5,)"), &f32s(5, false)),
        ),
        ("f32-empty", npy(1, &dict("<f4", false, "(0, 64)"), &[])),
        (
            "f32-scalar-v3",
            npy(3, &dict("<f4", false, "()"), &f32s(1, false)),
        ),
        (
            "i64-ids",
            npy(1, &dict("<i8", false, "(3,)"), &noise(1, 24)),
        ),
        (
            "u2-be-ids",
            npy(1, &dict(">u2", false, "(4,)"), &noise(2, 8)),
        ),
        (
            "i4-2x2-fortran",
            npy(2, &dict("<i4", true, "(2, 2)"), &noise(3, 16)),
        ),
        (
            "u1-2x2x2-fortran",
            npy(3, &dict("|u1", true, "(2, 2, 2)"), &noise(4, 8)),
        ),
        (
            "i1-native",
            npy(1, &dict("=i1", false, "(1, 4, 1)"), &noise(5, 4)),
        ),
        ("bool", npy(1, &dict("|b1", false, "(2,)"), &[0, 1])),
        ("f64", npy(1, &dict("<f8", false, "(2,)"), &noise(6, 16))),
        ("f16", npy(1, &dict("<f2", false, "(3,)"), &noise(7, 6))),
        (
            "python2-long",
            npy(1, &dict("<u4", false, "(2L, 1L)"), &noise(8, 8)),
        ),
        (
            "double-quotes",
            npy(
                1,
                "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1,)}",
                &f32s(1, false),
            ),
        ),
        (
            "key-order",
            npy(
                1,
                "{'shape': (2,), 'fortran_order': False, 'descr': '<i2'}",
                &noise(9, 4),
            ),
        ),
        // Broken.
        (
            "short-data",
            npy(1, &dict("<f4", false, "(2, 64)"), &[0; 100]),
        ),
        ("long-data", npy(1, &dict("<f4", false, "(2,)"), &[0; 12])),
        (
            "huge-shape",
            npy(1, &dict("<f4", false, "(4294967296, 4294967296, 16)"), &[]),
        ),
        (
            "overflowing-dim",
            npy(1, &dict("<f4", false, "(99999999999999999999,)"), &[]),
        ),
        (
            "negative-dim",
            npy(1, &dict("<f4", false, "(-2,)"), &[0; 8]),
        ),
        (
            "size-0-dtype",
            npy(1, &dict("|V0", false, "(65536, 65536)"), &[]),
        ),
        ("datetime", npy(1, &dict("<M8[ns]", false, "(1,)"), &[0; 8])),
        (
            "huge-itemsize",
            npy(1, &dict("<f2305843009213693952", false, "(1,)"), &[0; 4]),
        ),
        ("i16-bytes", npy(1, &dict("<i16", false, "(1,)"), &[0; 16])),
        (
            "structured",
            npy(
                1,
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
                &[0; 8],
            ),
        ),
        (
            "extra-key",
            npy(
                1,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
                &[0; 8],
            ),
        ),
        (
            "no-order",
            npy(1, "{'descr': '<f4', 'shape': (2,), }", &[0; 8]),
        ),
        (
            "trailing-junk",
            npy(
                1,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",
                &[0; 8],
            ),
        ),
        (
            "control-descr",
            npy(1, &dict("<f4\u{1b}[2J\r", false, "(2,)"), &[0; 4]),
        ),
        ("bad-magic", b"\x93NUMPX\x01\x00\x00\x00".to_vec()),
        ("version-9", b"\x93NUMPY\x09\x00\x00\x00".to_vec()),
        (
            "header-past-end",
            b"\x93NUMPY\x01\x00\xff\x00{'descr'".to_vec(),
        ),
        ("v2-truncated", b"\x93NUMPY\x02\x00\x10\x00".to_vec()),
        ("latin1-header", {
            let mut b = npy(1, &dict("<f4", false, "(1,)"), &[0; 4]);
            b[12] = 0xe9;
            b
        }),
    ];
    // One dim more than NumPy allows.
    let dims = vec!["1"; 65].join(", ");
    seeds.push((
        "65-dims",
        npy(1, &dict("<f4", false, &format!("({dims})")), &[0; 4]),
    ));
    seeds.into_iter().map(|(n, b)| (n.to_string(), b)).collect()
}

/// xorshift64*: deterministic filler bytes.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    let parse_dir = root.join("parse");
    let codec_dir = root.join("codecs");
    let npy_dir = root.join("npy");
    fs::create_dir_all(&parse_dir).unwrap();
    fs::create_dir_all(&codec_dir).unwrap();
    fs::create_dir_all(&npy_dir).unwrap();
    let put = |dir: &Path, name: &str, bytes: &[u8]| fs::write(dir.join(name), bytes).unwrap();

    let format_index = |f: Format| Format::ALL.iter().position(|&g| g == f).unwrap() as u8;

    for (m, model) in std::env::args().skip(1).enumerate() {
        let bytes = match fs::read(&model) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("skipping {model}: {e}");
                continue;
            }
        };
        put(
            &parse_dir,
            &format!("model{m}-head"),
            &bytes[..bytes.len().min(HEAD)],
        );
        let file = GgufFile::open(&model).expect("model opens");
        let mut w = GgufWriter::new();
        for (k, v) in file.metadata() {
            let v = match v {
                Value::Array(a) => Value::Array(cut(a, 8)),
                v => v.clone(),
            };
            w.metadata(k.as_str(), v);
        }
        let mut seen = Vec::new();
        for t in file.tensors() {
            if seen.contains(&t.format) {
                continue;
            }
            seen.push(t.format);
            let data = file.tensor_data(t);
            let spec = t.format.spec();
            let blocks = (data.len() / spec.bytes).min(2);
            w.tensor(
                t.name.as_str(),
                vec![(blocks * spec.elems) as u64],
                t.format,
                data[..blocks * spec.bytes].to_vec(),
            );
            let four = (data.len() / spec.bytes).min(4) * spec.bytes;
            let mut seed = vec![format_index(t.format)];
            seed.extend_from_slice(&data[..four]);
            put(&codec_dir, &format!("model{m}-{}", t.format.name()), &seed);
        }
        put(&parse_dir, &format!("model{m}-small"), &w.to_bytes());
    }

    // One tensor of every format, two blocks of noise, two rows.
    for (i, &f) in Format::ALL.iter().enumerate() {
        let spec = f.spec();
        let mut w = GgufWriter::new();
        w.metadata("general.architecture", "fuzz")
            .metadata("general.alignment", Value::U32(32))
            .tensor(
                "t",
                vec![spec.elems as u64, 2],
                f,
                noise(i as u64, 2 * spec.bytes),
            );
        put(&parse_dir, &format!("format-{}", f.name()), &w.to_bytes());
        let mut seed = vec![i as u8];
        seed.extend(noise(1000 + i as u64, 2 * spec.bytes));
        put(&codec_dir, &format!("noise-{}", f.name()), &seed);
    }

    // Every value type, nested arrays, several tensors, version 2.
    let mut w = GgufWriter::new();
    w.version(2)
        .alignment(64)
        .metadata("general.alignment", Value::U32(64))
        .metadata("u8", Value::U8(1))
        .metadata("i8", Value::I8(-1))
        .metadata("u16", Value::U16(2))
        .metadata("i16", Value::I16(-2))
        .metadata("u32", Value::U32(3))
        .metadata("i32", Value::I32(-3))
        .metadata("u64", Value::U64(4))
        .metadata("i64", Value::I64(-4))
        .metadata("f32", Value::F32(0.5))
        .metadata("f64", Value::F64(-0.25))
        .metadata("bool", Value::Bool(true))
        .metadata("str", "héllo")
        .metadata(
            "strs",
            Value::Array(Array::String(vec!["a".into(), "bc".into()])),
        )
        .metadata("bools", Value::Array(Array::Bool(vec![true, false])))
        .metadata(
            "nested",
            Value::Array(Array::Array(vec![
                Array::Array(vec![Array::I32(vec![1, 2]), Array::F64(vec![1.5])]),
                Array::U8(vec![]),
            ])),
        )
        .tensor("a", vec![4], Format::F32, noise(7, 16))
        .tensor("b", vec![32, 1, 1, 2], Format::Q8_0, noise(8, 68))
        .tensor("c", vec![256, 1, 1], Format::Q4_K, noise(9, 144));
    put(&parse_dir, "all-types", &w.to_bytes());

    for (name, bytes) in npy_seeds() {
        put(&npy_dir, &format!("{name}.npy"), &bytes);
    }
    eprintln!("seeds written under {}", root.display());
}

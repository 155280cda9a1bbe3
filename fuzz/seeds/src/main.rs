//! Writes the seed corpora: `gen_seeds [MODEL.gguf]...` fills `fuzz/corpus/parse/` and
//! `fuzz/corpus/codecs/` (git-ignored) with
//!
//! * the first 64 KiB of each model given (real metadata layouts: keys, tokenizer arrays);
//! * each model's header re-written small: its metadata with arrays cut to 8 items, and up to 8 of
//!   its tensors shrunk to one row of one or two blocks of their real bytes;
//! * writer-built files: one tensor of every format, every metadata value type, nested arrays;
//! * for the codec target, format-index byte + up to 4 blocks of real tensor bytes per format
//!   found in the models, and pseudo-random blocks for every format.
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
    fs::create_dir_all(&parse_dir).unwrap();
    fs::create_dir_all(&codec_dir).unwrap();
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
    eprintln!("seeds written under {}", root.display());
}

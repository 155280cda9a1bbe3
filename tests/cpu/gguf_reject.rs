//! Malformed and hostile files: each is rejected with its own `GgufError` variant, at once.

use std::time::{Duration, Instant};

use gguf_dequant::formats::TypeIdError;
use gguf_dequant::gguf::{parse, Array, GgufError, GgufWriter, Header, Value, ValueType};
use gguf_dequant::Format;

use crate::support::gguf::{build, Raw};
use crate::support::rng::Rng;

/// One tensor named `t` with the given dims, type id and offset, and `n` data bytes.
fn one_tensor(dims: &[u64], ty: u32, offset: u64, n: usize) -> Vec<u8> {
    Raw::header(3, 1, 0)
        .tensor(b"t", dims, ty, offset)
        .data(32, n)
        .bytes()
}

/// The base file the truncation cases cut, with its field offsets.
///
/// ```text
/// 0..24    header (1 tensor, 3 kv)
/// 24..156  "general.name" = string of 100 'a'   (key len 24, key 32, type 44, len 48, bytes 56)
/// 156..177 "k.u32" = u32 7                      (key len 156, key 164, type 169, value 173)
/// 177..246 "k.arr" = [i32; 10]                  (key len 177, key 185, type 190, elem 194, count 198, items 206)
/// 246..305 tensor "blk.0.attn_q.weight" [32, 4] F32 (name len 246, name 254, n_dims 273, dims 277, type 293, offset 297)
/// 320..832 data
/// ```
fn base() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.metadata("general.name", "a".repeat(100))
        .metadata("k.u32", Value::U32(7))
        .metadata("k.arr", Value::Array(Array::I32((0..10).collect())))
        .tensor(
            "blk.0.attn_q.weight",
            vec![32, 4],
            Format::F32,
            vec![1u8; 512],
        );
    let b = w.to_bytes();
    assert_eq!(&b[32..44], b"general.name");
    assert_eq!(&b[164..169], b"k.u32");
    assert_eq!(&b[185..190], b"k.arr");
    assert_eq!(&b[254..273], b"blk.0.attn_q.weight");
    assert_eq!(b.len(), 832);
    assert!(parse(&b).is_ok());
    b
}

fn cut(n: usize) -> Vec<u8> {
    base()[..n].to_vec()
}

/// The base file with `bytes` written at `at`.
fn patch(at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut b = base();
    b[at..at + bytes.len()].copy_from_slice(bytes);
    b
}

/// Arrays nested `depth` deep under one key, innermost an empty u8 array.
fn nested(depth: usize) -> Vec<u8> {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"nest").u32(9);
    for _ in 1..depth {
        r.u32(9).u64(1);
    }
    r.u32(0).u64(0);
    r.bytes()
}

type Check = fn(&GgufError) -> bool;

macro_rules! case {
    ($name:expr, $bytes:expr, $pat:pat $(if $guard:expr)?) => {
        ($name, $bytes, (|e: &GgufError| matches!(e, $pat $(if $guard)?)) as Check)
    };
}

fn cases() -> Vec<(&'static str, Vec<u8>, Check)> {
    use GgufError as E;
    let f8_room = |room: usize, last: bool| {
        let mut r = Raw::header(3, if last { 1 } else { 2 }, 0);
        r.tensor(b"fp8", &[128], 43, 0);
        if !last {
            r.tensor(b"next", &[8], 0, room as u64);
        }
        r.data(32, room + if last { 0 } else { 32 });
        r.bytes()
    };
    vec![
        // Truncation at every header field.
        case!("empty file", vec![], E::Truncated { offset: 0, .. }),
        case!("truncated magic", cut(2), E::Truncated { offset: 0, what, .. } if what == "magic"),
        case!("truncated version", cut(6), E::Truncated { offset: 4, what, .. } if what == "version"),
        case!("truncated tensor_count", cut(12), E::Truncated { offset: 8, what, .. } if what == "tensor_count"),
        case!(
            "truncated kv count",
            cut(20),
            E::Truncated { offset: 16, .. }
        ),
        case!(
            "truncated key length",
            cut(160),
            E::Truncated { offset: 156, .. }
        ),
        case!(
            "truncated key bytes",
            cut(166),
            E::StringLength {
                offset: 156,
                len: 5,
                ..
            }
        ),
        case!(
            "truncated string value",
            cut(100),
            E::StringLength {
                offset: 48,
                len: 100,
                ..
            }
        ),
        case!("truncated u32 value", cut(175), E::Truncated { offset: 173, what, .. } if what.contains("k.u32")),
        case!(
            "truncated value type",
            cut(171),
            E::Truncated { offset: 169, .. }
        ),
        case!(
            "truncated array items",
            cut(210),
            E::ArrayLength {
                offset: 198,
                count: 10,
                ..
            }
        ),
        case!(
            "truncated tensor name length",
            cut(250),
            E::Truncated { offset: 246, .. }
        ),
        case!(
            "truncated tensor name",
            cut(260),
            E::StringLength {
                offset: 246,
                len: 19,
                ..
            }
        ),
        case!(
            "truncated n_dims",
            cut(275),
            E::Truncated { offset: 273, .. }
        ),
        case!("truncated dims", cut(280), E::Truncated { offset: 277, .. }),
        case!("truncated type", cut(295), E::Truncated { offset: 293, .. }),
        case!(
            "truncated offset",
            cut(300),
            E::Truncated { offset: 297, .. }
        ),
        case!("no data", cut(305), E::TensorOutOfFile { n_bytes: 512, .. }),
        case!(
            "truncated data",
            cut(600),
            E::TensorOutOfFile {
                data_offset: 320,
                file_len: 600,
                ..
            }
        ),
        // Impossible counts and lengths.
        case!(
            "2^63 tensors in 40 bytes",
            {
                let mut r = Raw::header(3, 1 << 63, 0);
                r.u64(0).u64(0);
                r.bytes()
            },
            E::TensorCount {
                count: 0x8000_0000_0000_0000,
                remaining: 16
            }
        ),
        case!(
            "u64::MAX tensors",
            Raw::header(3, u64::MAX, 0).bytes(),
            E::TensorCount { .. }
        ),
        case!(
            "2^62 kv pairs",
            {
                let mut r = Raw::header(3, 0, 1 << 62);
                r.u64(0).u64(0);
                r.bytes()
            },
            E::MetadataCount { .. }
        ),
        case!(
            "2^62-element u8 array",
            {
                let mut r = Raw::header(3, 0, 1);
                r.str(b"a").u32(9).u32(0).u64(1 << 62).u64(0);
                r.bytes()
            },
            E::ArrayLength {
                count: 0x4000_0000_0000_0000,
                item_type: ValueType::U8,
                ..
            }
        ),
        case!(
            "u64::MAX-element string array",
            {
                let mut r = Raw::header(3, 0, 1);
                r.str(b"a").u32(9).u32(8).u64(u64::MAX).u64(0);
                r.bytes()
            },
            E::ArrayLength {
                item_type: ValueType::String,
                ..
            }
        ),
        case!(
            "u64::MAX-element array of arrays",
            {
                let mut r = Raw::header(3, 0, 1);
                r.str(b"a").u32(9).u32(9).u64(u64::MAX).u64(0);
                r.bytes()
            },
            E::ArrayLength {
                item_type: ValueType::Array,
                ..
            }
        ),
        case!(
            "huge string value length",
            {
                let mut r = Raw::header(3, 0, 1);
                r.str(b"a").u32(8).u64(u64::MAX);
                r.bytes()
            },
            E::StringLength { len: u64::MAX, .. }
        ),
        case!(
            "huge key length",
            {
                let mut r = Raw::header(3, 0, 1);
                r.u64(1 << 63).u64(0);
                r.bytes()
            },
            E::StringLength { offset: 24, .. }
        ),
        case!(
            "huge tensor name length",
            {
                let mut r = Raw::header(3, 1, 0);
                r.u64(1 << 63).u64(0).u64(0).u64(0);
                r.bytes()
            },
            E::StringLength { offset: 24, .. }
        ),
        case!(
            "100 000 nested arrays",
            nested(100_000),
            E::NestingTooDeep { max: 8, .. }
        ),
        case!("9 nested arrays", nested(9), E::NestingTooDeep { .. }),
        // Type ids.
        case!(
            "removed type 4",
            one_tensor(&[32], 4, 0, 64),
            E::TensorType {
                source: TypeIdError::Removed { id: 4, .. },
                ..
            }
        ),
        case!(
            "removed type 31",
            one_tensor(&[32], 31, 0, 64),
            E::TensorType {
                source: TypeIdError::Removed { id: 31, .. },
                ..
            }
        ),
        case!(
            "removed type 36",
            one_tensor(&[32], 36, 0, 64),
            E::TensorType {
                source: TypeIdError::Removed { id: 36, .. },
                ..
            }
        ),
        case!(
            "unknown type 44",
            one_tensor(&[32], 44, 0, 64),
            E::TensorType {
                source: TypeIdError::Unknown { id: 44 },
                ..
            }
        ),
        case!(
            "unknown type 1000",
            one_tensor(&[32], 1000, 0, 64),
            E::TensorType {
                source: TypeIdError::Unknown { id: 1000 },
                ..
            }
        ),
        // Dims.
        case!(
            "n_dims 0",
            one_tensor(&[], 0, 0, 64),
            E::DimCount { n_dims: 0, .. }
        ),
        case!(
            "n_dims 5",
            one_tensor(&[1, 1, 1, 1, 1], 0, 0, 64),
            E::DimCount { n_dims: 5, .. }
        ),
        case!(
            "dim 0",
            one_tensor(&[4, 0], 0, 0, 64),
            E::ZeroDim { axis: 1, .. }
        ),
        case!(
            "dims overflow u64",
            one_tensor(&[1 << 32, 1 << 32], 0, 0, 64),
            E::ElementCountOverflow { .. }
        ),
        case!(
            "dims overflow int64",
            one_tensor(&[1 << 62, 2], 24, 0, 64),
            E::ElementCountOverflow { .. }
        ),
        case!(
            "byte size overflows u64",
            one_tensor(&[1 << 62], 28, 0, 64),
            E::ByteSizeOverflow {
                format: Format::F64,
                ..
            }
        ),
        case!(
            "ne0 not a block multiple",
            one_tensor(&[33, 2], Format::Q4_0.id(), 0, 64),
            E::RowNotBlockMultiple {
                ne0: 33,
                block_elems: 32,
                format: Format::Q4_0,
                ..
            }
        ),
        case!(
            "ne0 not a K block multiple",
            one_tensor(&[128], Format::Q4_K.id(), 0, 144),
            E::RowNotBlockMultiple { .. }
        ),
        // Offsets and extents.
        case!(
            "unaligned offset",
            one_tensor(&[4], 0, 16, 64),
            E::UnalignedOffset {
                tensor_offset: 16,
                alignment: 32,
                ..
            }
        ),
        case!(
            "offset out of file",
            one_tensor(&[4], 0, 1 << 40, 64),
            E::TensorOutOfFile { .. }
        ),
        case!(
            "offset + size overflows",
            one_tensor(&[4], 0, u64::MAX - 31, 64),
            E::TensorOutOfFile { .. }
        ),
        case!(
            "extent past the end",
            one_tensor(&[16], 0, 32, 64),
            E::TensorOutOfFile { .. }
        ),
        case!(
            "overlapping tensors",
            {
                let mut r = Raw::header(3, 2, 0);
                r.tensor(b"a", &[16], 0, 0)
                    .tensor(b"b", &[16], 0, 32)
                    .data(32, 96);
                r.bytes()
            },
            E::TensorOverlap { .. }
        ),
        // Alignment.
        case!(
            "alignment 0",
            build(|w| {
                w.alignment(0)
                    .tensor("t", vec![4], Format::F32, vec![0; 16]);
            }),
            E::BadAlignment { alignment: 0, .. }
        ),
        case!(
            "alignment 3",
            build(|w| {
                w.alignment(3)
                    .tensor("t", vec![4], Format::F32, vec![0; 16]);
            }),
            E::BadAlignment { alignment: 3, .. }
        ),
        case!(
            "alignment as u64",
            build(|w| {
                w.metadata("general.alignment", Value::U64(32));
            }),
            E::AlignmentType {
                found: ValueType::U64,
                ..
            }
        ),
        case!(
            "alignment as string",
            build(|w| {
                w.metadata("general.alignment", "32");
            }),
            E::AlignmentType {
                found: ValueType::String,
                ..
            }
        ),
        // Names and keys.
        case!("duplicate tensor names", build(|w| { w.tensor("t", vec![4], Format::F32, vec![0; 16]).tensor("t", vec![4], Format::F32, vec![0; 16]); }),
            E::DuplicateTensor { name, .. } if name == "t"),
        case!("duplicate keys", build(|w| { w.metadata("k", 1u8).metadata("k", 2u8); }), E::DuplicateKey { key, .. } if key == "k"),
        case!(
            "65-byte tensor name",
            build(|w| {
                w.tensor("n".repeat(65), vec![4], Format::F32, vec![0; 16]);
            }),
            E::TensorNameTooLong { len: 65, .. }
        ),
        case!(
            "non-UTF-8 key",
            build(|w| {
                w.metadata(vec![b'k', 0xFF], 1u8);
            }),
            E::KeyNotUtf8 { offset: 24, .. }
        ),
        case!(
            "non-UTF-8 tensor name",
            build(|w| {
                w.tensor(vec![0xC3, 0x28], vec![4], Format::F32, vec![0; 16]);
            }),
            E::TensorNameNotUtf8 { index: 0, .. }
        ),
        // Values.
        case!(
            "bool byte 2",
            {
                let mut b = build(|w| {
                    w.metadata("b", true);
                });
                b[37] = 2;
                b
            },
            E::BadBool { byte: 2, .. }
        ),
        case!(
            "bool array byte 7",
            {
                let mut r = Raw::header(3, 0, 1);
                r.str(b"b").u32(9).u32(7).u64(3).u8(1).u8(0).u8(7);
                r.bytes()
            },
            E::BadBool {
                byte: 7,
                offset: 51,
                ..
            }
        ),
        case!(
            "unknown value type",
            {
                let mut r = Raw::header(3, 0, 1);
                r.str(b"k").u32(13).u64(0);
                r.bytes()
            },
            E::UnknownValueType {
                type_id: 13,
                offset: 33,
                ..
            }
        ),
        case!(
            "unknown array element type",
            {
                let mut r = Raw::header(3, 0, 1);
                r.str(b"k").u32(9).u32(99).u64(0);
                r.bytes()
            },
            E::UnknownValueType { type_id: 99, .. }
        ),
        // Magic and version.
        case!(
            "bad magic",
            patch(0, b"GGML"),
            E::BadMagic {
                found: [b'G', b'G', b'M', b'L']
            }
        ),
        case!("version 1", patch(4, &1u32.to_le_bytes()), E::Version1),
        case!(
            "version 4",
            patch(4, &4u32.to_le_bytes()),
            E::UnsupportedVersion { version: 4 }
        ),
        case!(
            "version 0",
            patch(4, &0u32.to_le_bytes()),
            E::UnsupportedVersion { version: 0 }
        ),
        case!(
            "big-endian v3",
            patch(4, &3u32.to_be_bytes()),
            E::BigEndian { swapped: 3, .. }
        ),
        case!(
            "big-endian v2",
            patch(4, &2u32.to_be_bytes()),
            E::BigEndian { swapped: 2, .. }
        ),
        // F8_E4M3 (id 43): only 1 byte per element.
        case!(
            "F8_E4M3 with 132-byte block room",
            f8_room(160, false),
            E::F8E4M3Size {
                n_elements: 128,
                room: 160,
                ..
            }
        ),
        case!(
            "F8_E4M3 last, 132-byte block room",
            f8_room(132, true),
            E::F8E4M3Size { room: 132, .. }
        ),
    ]
}

#[test]
fn every_malformed_file_is_rejected_with_its_variant_at_once() {
    let cases = cases();
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for (name, bytes, check) in &cases {
        let start = Instant::now();
        let result = parse(bytes);
        let elapsed = start.elapsed();
        match result {
            Err(ref e) if check(e) => {}
            other => failures.push(format!("{name}: got {other:?}")),
        }
        if elapsed > Duration::from_millis(250) {
            failures.push(format!("{name}: took {elapsed:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn f8_e4m3_one_byte_per_element_is_accepted() {
    let mut w = GgufWriter::new();
    w.tensor("fp8", vec![128, 3], Format::F8_E4M3, vec![0x38u8; 384])
        .tensor("after", vec![4], Format::F32, vec![0u8; 16])
        .tensor("fp8.last", vec![5], Format::F8_E4M3, vec![0x7Eu8; 5]);
    let h: Header = parse(&w.to_bytes()).unwrap();
    assert_eq!(h.tensors[0].n_bytes, 384);
    assert_eq!(h.tensors[2].n_bytes, 5);
    // Hand-built, unpadded at the end: still fine.
    let raw = one_tensor(&[128], 43, 0, 128);
    assert!(parse(&raw).is_ok());
}

#[test]
fn edge_values_that_are_accepted() {
    // A 64-byte tensor name, alignment 1, an empty tensor name, nesting at the limit.
    let ok = [
        build(|w| {
            w.tensor("n".repeat(64), vec![4], Format::F32, vec![0; 16]);
        }),
        build(|w| {
            w.alignment(1).tensor("", vec![3], Format::I8, vec![0; 3]);
        }),
        nested(8),
        // Gaps between tensors and tensors out of offset order are allowed.
        {
            let mut r = Raw::header(3, 2, 0);
            r.tensor(b"late", &[8], 0, 96)
                .tensor(b"early", &[8], 0, 0)
                .data(32, 128);
            r.bytes()
        },
    ];
    for (i, b) in ok.iter().enumerate() {
        parse(b).unwrap_or_else(|e| panic!("case {i}: {e}"));
    }
}

#[test]
fn error_messages_name_the_offset_key_and_tensor() {
    let msg = |b: &[u8]| parse(b).unwrap_err().to_string();
    assert_eq!(
        msg(&cut(20)),
        "truncated at byte 16 reading metadata_kv_count (file is 20 bytes)"
    );
    let mut b = base();
    b[293..297].copy_from_slice(&4u32.to_le_bytes());
    assert_eq!(
        msg(&b),
        "tensor \"blk.0.attn_q.weight\" at byte 246: type Q4_2 (id 4) was removed from ggml and is not supported"
    );
    let m = msg(&cut(175));
    assert!(
        m.contains("byte 173") && m.contains("\"k.u32\"") && m.contains("175 bytes"),
        "{m}"
    );
    let m = msg(&build(|w| {
        w.metadata("k", 1u8).metadata("k", 2u8);
    }));
    assert!(m.contains("\"k\"") && m.contains("byte 38"), "{m}");
    let m = msg(&one_tensor(&[4], 0, 16, 64));
    assert!(
        m.contains("\"t\"") && m.contains("byte 24") && m.contains("alignment 32"),
        "{m}"
    );
    let m = msg(&patch(4, &3u32.to_be_bytes()));
    assert!(m.starts_with("big-endian GGUF is not supported"), "{m}");
    let m = msg(&patch(4, &1u32.to_le_bytes()));
    assert!(
        m.contains("version 1") && m.contains("not supported"),
        "{m}"
    );
    let m = msg(&nested(100_000));
    assert!(m.contains("\"nest\"") && m.contains("8 levels"), "{m}");
    let m = msg(&cut(600));
    assert!(
        m.contains("\"blk.0.attn_q.weight\"") && m.contains("600 bytes"),
        "{m}"
    );
}

/// A poor man's fuzz run: truncations and byte flips of valid files never panic.
#[test]
fn mutated_files_never_panic() {
    let seeds = [
        base(),
        build(|w| {
            w.metadata(
                "a",
                Value::Array(Array::Array(vec![Array::String(vec!["x".into()])])),
            )
            .metadata("b", true)
            .tensor("q", vec![256, 2], Format::Q4_K, vec![0; 288])
            .tensor("f", vec![64], Format::F8_E4M3, vec![0; 64]);
        }),
    ];
    let mut rng = Rng::new(0x1234_5678_9ABC_DEF1);
    let mut next = move || rng.next_u64();
    for seed in &seeds {
        for n in 0..=seed.len() {
            let _ = parse(&seed[..n]);
        }
        for _ in 0..3000 {
            let mut b = seed.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % b.len() as u64) as usize;
                b[i] = match next() % 4 {
                    0 => 0xFF,
                    1 => 0,
                    _ => next() as u8,
                };
            }
            let _ = parse(&b);
        }
    }
}

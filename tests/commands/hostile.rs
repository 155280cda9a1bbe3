//! The hostile-file regression corpus: `tests/corpus/*.gguf`, each the shape of a known bug in
//! another GGUF reader (or one the fuzzers found here), rejected at once with a named error.
//!
//! * [`CASES`] is the manifest: file, the bug it reproduces, the [`GgufError`] variant expected and
//!   a substring of its message. `tests/corpus/manifest.json` is the same table for other tools.
//! * Every file is built by code in this file, deterministically. The committed bytes must match
//!   the builders; to regenerate after changing one, run
//!   `GGUF_REGEN_CORPUS=1 cargo test --test commands hostile::corpus_files_match_builders`.
//! * Each file must be rejected in well under a second (asserted < 1 s) and within a bounded
//!   amount of memory: the parse is repeated in a child process whose address space is capped with
//!   `ulimit -v` at [`CHILD_VM_KIB`], far less than any allocation sized by a hostile count.
//! * The CLI runs every command in [`CLI_COMMANDS`] on every file: exit code 1, exactly one stderr
//!   line starting `error: `, no panic text, and no output file left behind.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gguf_dequant::gguf::{parse, GgufError};

use crate::support::cli::EXE;
use crate::support::gguf::Raw;

// GGUF metadata value type ids.
const T_U8: u32 = 0;
const T_U32: u32 = 4;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;
// ggml type ids.
const F32: u32 = 0;
const Q4_0: u32 = 2;

/// One corpus file.
struct Case {
    /// File name under `tests/corpus/`.
    file: &'static str,
    /// The bug it reproduces.
    source: &'static str,
    /// What the file does.
    what: &'static str,
    /// Builds the bytes.
    build: fn() -> Vec<u8>,
    /// Expected `GgufError` variant name.
    variant: &'static str,
    /// A substring of the expected message.
    message: &'static str,
}

/// The manifest. Adding a file: one entry here, then regenerate (see the module docs).
const CASES: &[Case] = &[
    // ggml-org/ggml#709 (Databricks' report, 2024): counts and lengths multiplied by a struct or
    // item size in size_t wrapped, so calloc got a small size and the reads that followed
    // overflowed the heap; n_dims > 4 wrote past ne[4]; an unchecked type id indexed the type table.
    Case {
        file: "ggml709-kv-count-wraps.gguf",
        source: "ggml-org/ggml#709",
        what: "metadata_kv_count 2^58+1: times a 64-byte struct it wraps to 64 (calloc too small)",
        build: || {
            Raw::header(3, 0, (1 << 58) + 1)
                .key(b"general.name", T_STRING)
                .str(b"x")
                .bytes()
        },
        variant: "MetadataCount",
        message: "metadata_kv_count 288230376151711745 at byte 16 is impossible",
    },
    Case {
        file: "ggml709-tensor-count-wraps.gguf",
        source: "ggml-org/ggml#709",
        what: "tensor_count 2^57+1: times a 128-byte tensor-info struct it wraps to 128",
        build: || {
            Raw::header(3, (1 << 57) + 1, 0)
                .tensor(b"t", &[32], F32, 0)
                .data(32, 128)
                .bytes()
        },
        variant: "TensorCount",
        message: "tensor_count 144115188075855873 at byte 8 is impossible",
    },
    Case {
        file: "ggml709-string-len-u64-max.gguf",
        source: "ggml-org/ggml#709",
        what: "key length 2^64-1: calloc(n + 1) wraps to calloc(0), then n bytes are read into it",
        build: || {
            Raw::header(3, 0, 1)
                .u64(u64::MAX)
                .raw(b"general.name")
                .bytes()
        },
        variant: "StringLength",
        message: "key of metadata pair #0: string length 18446744073709551615 at byte 24",
    },
    Case {
        file: "ggml709-array-bytes-wrap.gguf",
        source: "ggml-org/ggml#709",
        what: "u32 array of 2^62+1 items: count * 4 wraps to 4, so 4 bytes are allocated",
        build: || {
            Raw::header(3, 0, 1)
                .key(b"a", T_ARRAY)
                .u32(T_U32)
                .u64((1 << 62) + 1)
                .u32(7)
                .bytes()
        },
        variant: "ArrayLength",
        message: "metadata \"a\": array of 4611686018427387905 u32 items at byte 41 is impossible",
    },
    Case {
        file: "ggml709-n-dims-5.gguf",
        source: "ggml-org/ggml#709",
        what: "n_dims 5 with five dims: the fifth is written past ne[GGML_MAX_DIMS = 4]",
        build: || {
            Raw::header(3, 1, 0)
                .tensor(b"t", &[32, 1, 1, 1, 1], F32, 0)
                .data(32, 128)
                .bytes()
        },
        variant: "DimCount",
        message: "tensor \"t\" at byte 24: n_dims is 5, must be 1 to 4",
    },
    Case {
        file: "ggml709-type-id-u32-max.gguf",
        source: "ggml-org/ggml#709",
        what: "tensor type id 2^32-1, used unchecked as an index into ggml's type table",
        build: || {
            Raw::header(3, 1, 0)
                .tensor(b"t", &[32], u32::MAX, 0)
                .data(32, 128)
                .bytes()
        },
        variant: "TensorType",
        message: "unknown ggml type id 4294967295",
    },
    // ggml-org/ggml#1516: 1 GiB strings and arrays were under ggml's caps, so a ~100-byte file
    // made it allocate a GiB before reading anything; general.alignment had no upper bound.
    Case {
        file: "ggml1516-string-1gib.gguf",
        source: "ggml-org/ggml#1516",
        what: "a 1 GiB - 1 string value (just under ggml's cap) in a 61-byte file",
        build: || {
            Raw::header(3, 0, 1)
                .key(b"general.name", T_STRING)
                .u64((1 << 30) - 1)
                .raw(b"model")
                .bytes()
        },
        variant: "StringLength",
        message: "value of \"general.name\": string length 1073741823 at byte 48",
    },
    Case {
        file: "ggml1516-array-1gib.gguf",
        source: "ggml-org/ggml#1516",
        what: "tokenizer.ggml.tokens: an array of 2^30 strings in a 92-byte file",
        build: || {
            Raw::header(3, 0, 1)
                .key(b"tokenizer.ggml.tokens", T_ARRAY)
                .u32(T_STRING)
                .u64(1 << 30)
                .str(b"<s>")
                .str(b"</s>")
                .bytes()
        },
        variant: "ArrayLength",
        message: "array of 1073741824 string items",
    },
    Case {
        file: "ggml1516-alignment-1gib.gguf",
        source: "ggml-org/ggml#1516",
        what: "general.alignment 2^30 and two tensors: a GiB of padding before and between them",
        build: || {
            Raw::header(3, 2, 1)
                .key(b"general.alignment", T_U32)
                .u32(1 << 30)
                .tensor(b"a", &[32], F32, 0)
                .tensor(b"b", &[32], F32, 1 << 30)
                .data(32, 256)
                .bytes()
        },
        variant: "TensorOutOfFile",
        message: "(data section at byte 1073741824) run past the end of the file",
    },
    // ggml-org/llama.cpp#18674 (GHSA-vgg9-87g3-85w8): ggml_nbytes wraps in size_t, so a tensor
    // claiming 2^62 f32 values passed every size check with a byte size of 0.
    Case {
        file: "llamacpp18674-nbytes-wraps.gguf",
        source: "ggml-org/llama.cpp#18674",
        what: "\"overflow_tensor\": 2^62 F32 elements (fits int64) of 4 bytes = 2^64, wraps to 0",
        build: || {
            Raw::header(3, 1, 0)
                .tensor(b"overflow_tensor", &[1 << 62, 1, 1, 1], F32, 0)
                .data(32, 64)
                .bytes()
        },
        variant: "ByteSizeOverflow",
        message: "4611686018427387904 F32 elements overflow a u64 byte size",
    },
    Case {
        file: "llamacpp18674-q4_0-nbytes-wraps.gguf",
        source: "ggml-org/llama.cpp#18674 (block-type variant, llama.cpp#27200)",
        what: "Q4_0 ne0 = 5124095576030431008: ne0 * 18 wraps before / 32, ggml_nbytes says 2",
        build: || {
            Raw::header(3, 1, 0)
                .tensor(b"t", &[5124095576030431008], Q4_0, 0)
                .data(32, 64)
                .bytes()
        },
        variant: "TensorOutOfFile",
        message: "its 2882303761517117442 bytes at data offset 0",
    },
    Case {
        file: "llamacpp26978-pad-wrap.gguf",
        source: "ggml-org/llama.cpp#26978 (same class as #18674)",
        what: "a valid tensor, then F32 [4, 2^30-1, 2^30+1, 1]: 2^64-16 bytes, 0 once padded",
        build: || {
            Raw::header(3, 2, 0)
                .tensor(b"a", &[64], F32, 0)
                .tensor(b"b", &[4, (1 << 30) - 1, (1 << 30) + 1, 1], F32, 256)
                .data(32, 384)
                .bytes()
        },
        variant: "TensorOutOfFile",
        message: "its 18446744073709551600 bytes at data offset 256",
    },
    // ggml-org/llama.cpp#27188: gguf-py's GGUFReader looped over a 2^63-item array in a 43-byte
    // file, never returning and growing ~120 MB/s (the thread does not give the bytes; this is the
    // same fields with a one-byte key: 49 bytes).
    Case {
        file: "llamacpp27188-array-2p63.gguf",
        source: "ggml-org/llama.cpp#27188",
        what: "a u8 array of 2^63 items, no items present: hung gguf-py with unbounded memory",
        build: || {
            Raw::header(3, 0, 1)
                .key(b"a", T_ARRAY)
                .u32(T_U8)
                .u64(1 << 63)
                .bytes()
        },
        variant: "ArrayLength",
        message: "array of 9223372036854775808 u8 items at byte 41 is impossible",
    },
    // huggingface/huggingface.js#2028: array-of-array recursed without a depth limit (stack
    // overflow), n_dims = 0xFFFFFFFF looped billions of times, an invalid array element type
    // crashed on `undefined`.
    Case {
        file: "hfjs2028-nested-arrays.gguf",
        source: "huggingface/huggingface.js#2028",
        what: "arrays nested 64 deep, one item each (12 bytes a level)",
        build: || {
            let mut r = Raw::header(3, 0, 1);
            r.key(b"nest", T_ARRAY);
            for _ in 0..63 {
                r.u32(T_ARRAY).u64(1);
            }
            r.u32(T_U8).u64(0);
            r.bytes()
        },
        variant: "NestingTooDeep",
        message: "metadata \"nest\": arrays nested deeper than 8 levels",
    },
    Case {
        file: "hfjs2028-n-dims-u32-max.gguf",
        source: "huggingface/huggingface.js#2028",
        what: "n_dims 2^32-1: the shape loop would run four billion times",
        build: || {
            Raw::header(3, 1, 0)
                .tensor_n(b"t", u32::MAX, &[32; 4], F32, 0)
                .data(32, 128)
                .bytes()
        },
        variant: "DimCount",
        message: "n_dims is 4294967295, must be 1 to 4",
    },
    Case {
        file: "hfjs2028-array-item-type-invalid.gguf",
        source: "huggingface/huggingface.js#2028",
        what: "an array whose element type is 13, not a GGUF value type",
        build: || {
            Raw::header(3, 0, 1)
                .key(b"a", T_ARRAY)
                .u32(13)
                .u64(1)
                .u32(0)
                .bytes()
        },
        variant: "UnknownValueType",
        message: "metadata \"a\": unknown value type 13 at byte 37",
    },
    // antirez/gguf-tools#25 (fixed in PR #28, with #27): n_dims > 8 wrote past `dim[8]` (the
    // assert compiles out under NDEBUG); key lengths were used to index the map unchecked;
    // general.alignment = 0 divided by zero; the tensor-info walk ran past the end of the map.
    Case {
        file: "gguftools25-n-dims-9.gguf",
        source: "antirez/gguf-tools#25",
        what: "n_dims 9 with nine dims: the ninth is written past uint64_t dim[8]",
        build: || {
            Raw::header(3, 1, 0)
                .tensor(b"t", &[32, 1, 1, 1, 1, 1, 1, 1, 1], F32, 0)
                .data(32, 128)
                .bytes()
        },
        variant: "DimCount",
        message: "n_dims is 9, must be 1 to 4",
    },
    Case {
        file: "gguftools25-key-len-past-eof.gguf",
        source: "antirez/gguf-tools#25",
        what: "a key length of 4096 in a 49-byte file: the key is read past the mapping",
        build: || {
            Raw::header(3, 0, 1)
                .u64(4096)
                .raw(b"general.name\x04\0\0\0\x01")
                .bytes()
        },
        variant: "StringLength",
        message: "key of metadata pair #0: string length 4096 at byte 24",
    },
    Case {
        file: "gguftools28-alignment-zero.gguf",
        source: "antirez/gguf-tools#28 (issue #27)",
        what: "general.alignment = 0 and one minimal tensor: offset % 0 is SIGFPE",
        build: || {
            Raw::header(3, 1, 1)
                .key(b"general.alignment", T_U32)
                .u32(0)
                .tensor(b"t", &[1], F32, 0)
                .bytes()
        },
        variant: "BadAlignment",
        message: "\"general.alignment\" at byte 53 is 0: it must be a non-zero power of two",
    },
    Case {
        file: "gguftools28-tensor-info-truncated.gguf",
        source: "antirez/gguf-tools#28",
        what: "the file ends inside a tensor's dims: the info walk would read past the mapping",
        build: || {
            let mut r = Raw::header(3, 1, 1);
            r.key(b"k", T_STRING).str(b"padding-padding-pad");
            r.str(b"t").u32(2).u64(32);
            r.bytes()
        },
        variant: "Truncated",
        message: "reading dim 1 of tensor \"t\"",
    },
    // zackshen/gguf#15: `shape[0] * shape[1] * ...` wrapped in release builds (a huge tensor
    // with a tiny size), and `shape[i]` for n_dims > 4 indexed a [u64; 4] out of bounds.
    Case {
        file: "zackshen15-dims-product-wraps.gguf",
        source: "zackshen/gguf#15",
        what: "F32 dims [2^64-1, 2, 1, 1]: the element count wraps",
        build: || {
            Raw::header(3, 1, 0)
                .tensor(b"t", &[u64::MAX, 2, 1, 1], F32, 0)
                .data(32, 64)
                .bytes()
        },
        variant: "ElementCountOverflow",
        message: "element count of dims [18446744073709551615, 2, 1, 1] overflows int64",
    },
    Case {
        file: "zackshen15-n-dims-6.gguf",
        source: "zackshen/gguf#15",
        what: "n_dims 6: shape[4] on a [u64; 4] panics",
        build: || {
            Raw::header(3, 1, 0)
                .tensor(b"t", &[32, 1, 1, 1, 1, 1], F32, 0)
                .data(32, 128)
                .bytes()
        },
        variant: "DimCount",
        message: "n_dims is 6, must be 1 to 4",
    },
    // Found in the audit for this corpus: keys and tensor names are file bytes, and were printed
    // raw in error messages, so a file could split the CLI's one-line error and send terminal
    // escape sequences.
    Case {
        file: "escape-in-key.gguf",
        source: "gguf-dequant (audit)",
        what: "a repeated key holding a newline, a fake `error:` line and an OSC title escape",
        build: || {
            let key = b"a\n\x1b]0;owned\x07error: fake";
            Raw::header(3, 0, 2)
                .key(key, T_U8)
                .raw(&[1])
                .key(key, T_U8)
                .raw(&[2])
                .bytes()
        },
        variant: "DuplicateKey",
        message: r#"metadata key "a\n\u{1b}]0;owned\u{7}error: fake" at byte 60 appears twice"#,
    },
];

/// CLI invocations run on every corpus file; `{file}` is the corpus file, `{out}` an output path
/// in a fresh directory. Each must fail with one `error: ` line and leave `{out}` absent.
const CLI_COMMANDS: &[&[&str]] = &[
    &["inspect", "{file}"],
    &["inspect", "--json", "{file}"],
    &["dequant", "{file}", "--out", "{out}.safetensors"],
    &["dequant", "{file}", "--out", "{out}.npy", "--tensor", "t"],
    &[
        "dequant",
        "{file}",
        "--out",
        "{out}.bin",
        "--backend",
        "cpu",
    ],
    &["verify", "{file}"],
    &["verify", "{file}", "--op", "all"],
    &[
        "apply",
        "{file}",
        "--tensor",
        "t",
        "--op",
        "matvec",
        "--input",
        "{out}.x.npy",
        "--out",
        "{out}.npy",
        "--backend",
        "cpu",
    ],
    &["load", "{file}"],
    &["load", "{file}", "--source", "read", "--dtype", "raw"],
    &["convert", "{file}", "{out}.safetensors"],
];

/// Address-space cap, in KiB, for the child process that parses the corpus.
const CHILD_VM_KIB: u64 = 256 * 1024;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn variant_name(e: &GgufError) -> String {
    let dbg = format!("{e:?}");
    dbg.split([' ', '(', '{']).next().unwrap_or("").to_owned()
}

fn manifest_json() -> String {
    let entries: Vec<serde_json::Value> = CASES
        .iter()
        .map(|c| {
            serde_json::json!({
                "file": c.file,
                "source": c.source,
                "what": c.what,
                "error": c.variant,
                "message": c.message,
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&entries).unwrap();
    s.push('\n');
    s
}

#[test]
fn corpus_files_match_builders() {
    let dir = corpus_dir();
    let regen = std::env::var_os("GGUF_REGEN_CORPUS").is_some();
    if regen {
        fs::create_dir_all(&dir).unwrap();
    }
    for case in CASES {
        let bytes = (case.build)();
        assert!(bytes.len() < 1024, "{}: {} bytes", case.file, bytes.len());
        let path = dir.join(case.file);
        if regen {
            fs::write(&path, &bytes).unwrap();
        }
        let committed = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            committed == bytes,
            "{} differs from its builder; regenerate with GGUF_REGEN_CORPUS=1",
            case.file
        );
    }
    let manifest = dir.join("manifest.json");
    if regen {
        fs::write(&manifest, manifest_json()).unwrap();
    }
    assert_eq!(fs::read_to_string(&manifest).unwrap(), manifest_json());

    // No stray file: every .gguf in the folder is in the table.
    let mut names: Vec<String> = CASES.iter().map(|c| c.file.to_owned()).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "duplicate file names in CASES");
    for entry in fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".gguf") {
            assert!(names.contains(&name), "{name} is not in CASES");
        }
    }
}

/// Parses every committed corpus file and checks the error; returns how long the slowest took.
fn check_corpus() -> Duration {
    let mut slowest = Duration::ZERO;
    for case in CASES {
        let bytes = fs::read(corpus_dir().join(case.file)).unwrap();
        let start = Instant::now();
        let result = parse(&bytes);
        let took = start.elapsed();
        slowest = slowest.max(took);
        let err = match result {
            Ok(h) => panic!("{}: accepted: {h:?}", case.file),
            Err(e) => e,
        };
        let msg = err.to_string();
        assert_eq!(variant_name(&err), case.variant, "{}: {msg}", case.file);
        assert!(
            msg.contains(case.message),
            "{}: message {msg:?} lacks {:?}",
            case.file,
            case.message
        );
        assert!(
            !msg.chars().any(char::is_control),
            "{}: control character in message {msg:?}",
            case.file
        );
        assert!(
            took < Duration::from_secs(1),
            "{}: took {took:?}",
            case.file
        );
    }
    slowest
}

#[test]
fn corpus_rejected_fast_with_expected_errors() {
    let slowest = check_corpus();
    eprintln!("slowest corpus parse: {slowest:?}");
}

/// Run as a child by [`corpus_rejected_in_capped_address_space`]; also an ordinary test.
#[test]
fn corpus_child() {
    if std::env::var_os("HOSTILE_ALLOC_PROBE").is_some() {
        // Shows the cap bites: this must kill the child.
        let v = vec![1u8; 2 * CHILD_VM_KIB as usize * 1024];
        assert_eq!(v[v.len() - 1], 1);
        return;
    }
    check_corpus();
}

/// This test binary, re-run as `hostile::corpus_child` under `ulimit -v`.
fn capped_child(probe: bool) -> std::process::Output {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {CHILD_VM_KIB} && exec \"$0\" \"$@\""))
        .arg(exe)
        .args([
            "hostile::corpus_child",
            "--exact",
            "--test-threads=1",
            "--nocapture",
        ]);
    if probe {
        cmd.env("HOSTILE_ALLOC_PROBE", "1");
    }
    cmd.output().unwrap()
}

#[test]
fn corpus_rejected_in_capped_address_space() {
    let out = capped_child(false);
    assert!(
        out.status.success(),
        "parsing the corpus under ulimit -v {CHILD_VM_KIB} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The filter names the child test by its path in this binary: a stale one would run nothing.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test:\n{stdout}"
    );
    let probe = capped_child(true);
    assert!(
        !probe.status.success(),
        "the address-space cap did not stop a {} MiB allocation",
        2 * CHILD_VM_KIB / 1024
    );
}

#[test]
fn cli_fails_cleanly_on_corpus() {
    let exe = EXE;
    for case in CASES {
        let file = corpus_dir().join(case.file);
        for template in CLI_COMMANDS {
            let dir = tempfile::tempdir().unwrap();
            let out_stem = dir.path().join("out");
            let args: Vec<OsString> = template
                .iter()
                .map(|a| {
                    let a = a.replace("{file}", file.to_str().unwrap());
                    OsString::from(a.replace("{out}", out_stem.to_str().unwrap()))
                })
                .collect();
            let what = format!("{} {:?}", case.file, template);
            let start = Instant::now();
            let out = Command::new(exe).args(&args).output().unwrap();
            let took = start.elapsed();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what}: stderr {stderr}");
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines.len(), 1, "{what}: stderr {stderr:?}");
            assert!(lines[0].starts_with("error: "), "{what}: {stderr:?}");
            assert!(lines[0].contains(case.message), "{what}: {stderr:?}");
            assert!(!stderr.contains("panicked"), "{what}: {stderr:?}");
            assert!(
                !stderr.chars().any(|c| c.is_control() && c != '\n'),
                "{what}: control character in {stderr:?}"
            );
            assert!(took < Duration::from_secs(5), "{what}: took {took:?}");
            let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
            assert!(left.is_empty(), "{what}: left {left:?}");
        }
    }
}

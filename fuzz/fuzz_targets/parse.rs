//! Fuzz target: the GGUF reader on whole-file bytes.
//!
//! `gguf::parse` must never panic; its error messages must hold no control characters (keys and
//! names come from the file); a header it accepts must keep every promise the reader documents (tensor extents inside the file, no overlaps, sizes that match the format). An
//! accepted file is then opened through the memory map (`GgufFile::open`, the path the CLI takes)
//! and rendered by both `inspect` outputs, and every tensor is decoded by the CPU codecs.
#![no_main]

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use gguf_dequant::gguf::{parse, Header};
use gguf_dequant::{cpu, DType, GgufFile};

/// The command line's `inspect` renderer (JSON and text), compiled in from the binary's source.
#[path = "../../src/bin/gguf-dequant/render/inspect.rs"]
mod inspect;
use libfuzzer_sys::fuzz_target;

/// A scratch file per fuzzing process (`-fork`/`-jobs` children have their own pid).
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::var_os("GGUF_FUZZ_TMP")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        dir.join(format!("gguf-dequant-fuzz-{}.gguf", std::process::id()))
    })
}

fn check_invariants(h: &Header, len: u64) {
    assert!(h.version == 2 || h.version == 3);
    assert!(h.alignment.is_power_of_two());
    assert_eq!(h.data_offset % h.alignment, 0);
    assert!(h.data_offset <= len || h.tensors.is_empty());
    let mut extents = Vec::new();
    for t in &h.tensors {
        assert!((1..=4).contains(&t.dims.len()), "{t:?}");
        assert!(t.dims.iter().all(|&d| d > 0), "{t:?}");
        let n: u64 = t.dims.iter().product();
        assert_eq!(n, t.n_elements);
        assert!(i64::try_from(n).is_ok());
        assert_eq!(t.format.bytes_for(n), Some(t.n_bytes), "{t:?}");
        assert_eq!(t.dims[0] % t.format.block_elems() as u64, 0);
        assert_eq!(t.offset % h.alignment, 0);
        let start = h.data_offset + t.offset;
        let end = start + t.n_bytes;
        assert!(end <= len, "{t:?} ends past {len}");
        extents.push((t.offset, t.offset + t.n_bytes));
    }
    extents.sort();
    for w in extents.windows(2) {
        assert!(w[0].1 <= w[1].0, "overlap {w:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let header = match parse(data) {
        Ok(h) => h,
        Err(e) => {
            // Keys and names are file bytes: a message must stay one printable line.
            let msg = e.to_string();
            assert!(
                !msg.chars().any(char::is_control),
                "control character in {msg:?}"
            );
            return;
        }
    };
    check_invariants(&header, data.len() as u64);

    // The same bytes through the memory map must give the same header.
    let path = scratch();
    {
        let mut f = std::fs::File::create(path).expect("create scratch file");
        f.write_all(data).expect("write scratch file");
    }
    let file = GgufFile::open(path).expect("a file parse accepted must open");
    // (Compared through Debug: a NaN metadata float is not == itself.)
    assert_eq!(format!("{:?}", file.header()), format!("{header:?}"));

    let json = inspect::to_json(&file).to_string();
    assert!(json.starts_with('{'));
    let mut text = Vec::new();
    inspect::write_text(&file, &mut text).expect("write_text to a Vec");

    for t in file.tensors() {
        assert!(file.tensor(&t.name).is_some());
        let src = file.tensor_data(t);
        assert_eq!(src.len() as u64, t.n_bytes);
        let vals = cpu::dequant_f32_with(t.format, src, Some(1)).expect("decode");
        assert_eq!(vals.len() as u64, t.n_elements);
        let mut half = vec![0u8; vals.len() * 2];
        cpu::dequant_to_bytes_with(t.format, src, DType::F16, &mut half, Some(1)).expect("f16");
    }
});

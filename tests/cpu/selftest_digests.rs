//! The CPU digests that `selftest` checks without a GPU (`src/selftest_digests.txt`) are those of
//! the current CPU codecs, which the oracle tests check against ggml. `GGUF_DEQUANT_BLESS=1`
//! rewrites the file.

use gguf_dequant::selftest::{cpu_digest, CPU_DIGESTS};
use gguf_dequant::Format;

#[test]
fn recorded_digests_match_the_cpu_codecs() {
    let mut want = String::new();
    for &f in Format::ALL {
        want.push_str(&format!("{} {}\n", f.name(), cpu_digest(f).unwrap()));
    }
    if std::env::var_os("GGUF_DEQUANT_BLESS").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/selftest_digests.txt");
        std::fs::write(path, &want).unwrap();
        return;
    }
    assert_eq!(
        CPU_DIGESTS, want,
        "CPU output changed: rerun with GGUF_DEQUANT_BLESS=1 only if the oracle tests pass"
    );
}

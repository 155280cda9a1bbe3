//! The two real PyPI models against ggml's own C reader and codecs and against gguf-py: every
//! tensor's header fields, the metadata keys, and every tensor decoded bit-for-bit.

use gguf_dequant::{cpu, GgufFile};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::support;

fn read_json(path: &std::path::Path) -> Json {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `gguf-dequant inspect --json` (so only with the binary, feature `cli`).
#[cfg(feature = "cli")]
#[test]
fn inspect_matches_ggml_and_gguf_py() {
    const TEST: &str = "inspect_matches_ggml_and_gguf_py";
    for model in support::MODEL_FILES {
        let (Some(path), Some(oracle)) = (
            support::model_file(TEST, model),
            support::oracle_file(TEST, &format!("inspect/{model}.json")),
        ) else {
            return;
        };
        let ours: Json = serde_json::from_slice(
            &support::cli::run(&["inspect", "--json", path.to_str().unwrap()]).stdout,
        )
        .unwrap();
        let oracle = read_json(&oracle);
        let our_keys: Vec<&str> = ours["metadata"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for reader in ["ggml", "gguf_py"] {
            let theirs = &oracle[reader];
            for field in ["version", "alignment", "data_offset"] {
                assert_eq!(ours[field], theirs[field], "{model}: {field} vs {reader}");
            }
            let keys: Vec<&str> = theirs["metadata_keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap())
                .collect();
            assert_eq!(our_keys, keys, "{model}: metadata keys vs {reader}");
            let our_tensors = ours["tensors"].as_array().unwrap();
            let their_tensors = theirs["tensors"].as_array().unwrap();
            assert_eq!(
                our_tensors.len(),
                their_tensors.len(),
                "{model}: tensor count vs {reader}"
            );
            assert_eq!(theirs["n_tensors"], our_tensors.len());
            for (o, t) in our_tensors.iter().zip(their_tensors) {
                let name = &o["name"];
                assert_eq!(name, &t["name"], "{model}: tensor order vs {reader}");
                for field in ["type_id", "offset", "n_bytes"] {
                    assert_eq!(o[field], t[field], "{model}: {name} {field} vs {reader}");
                }
                // ggml's C reader reports all four ne, padded with 1; gguf-py the stored dims.
                let mut dims: Vec<u64> = o["dims"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap())
                    .collect();
                if let Some(ne) = t.get("ne") {
                    dims.resize(4, 1);
                    assert_eq!(
                        serde_json::json!(dims),
                        *ne,
                        "{model}: {name} ne vs {reader}"
                    );
                } else {
                    assert_eq!(
                        serde_json::json!(dims),
                        t["dims"],
                        "{model}: {name} dims vs {reader}"
                    );
                }
            }
        }
    }
}

#[test]
fn every_real_tensor_decodes_like_ggml() {
    const TEST: &str = "every_real_tensor_decodes_like_ggml";
    for model in support::MODEL_FILES {
        let (Some(path), Some(oracle)) = (
            support::model_file(TEST, model),
            support::oracle_file(TEST, &format!("models/{model}.json")),
        ) else {
            return;
        };
        let file = GgufFile::open(&path).unwrap();
        let oracle = read_json(&oracle);
        let expected = oracle["tensors"].as_object().unwrap();
        assert_eq!(
            expected.len(),
            file.tensors().len(),
            "{model}: tensor count"
        );
        let mut failures = Vec::new();
        for t in file.tensors() {
            let e = &expected[&t.name];
            assert_eq!(e["type_id"], t.format.id(), "{model}: {}", t.name);
            assert_eq!(e["n_values"], t.n_elements, "{model}: {}", t.name);
            let values = cpu::dequant_f32(t.format, file.tensor_data(t)).unwrap();
            let mut hash = Sha256::new();
            for v in &values {
                hash.update(v.to_le_bytes());
            }
            let ours = format!("{:x}", hash.finalize());
            if e["sha256"] != ours.as_str() {
                failures.push(format!("{model}: {} ({})", t.name, t.format));
            }
        }
        assert!(
            failures.is_empty(),
            "decoded differently from ggml:\n{}",
            failures.join("\n")
        );
    }
}

//! `dequant` outputs read back by the Python ecosystem: `.npy` by numpy and `.safetensors` by the
//! safetensors package, on the real SmolLM2 model, equal the library's output bit-for-bit.

use std::collections::BTreeMap;
use std::process::Command;

use gguf_dequant::{DType, GgufFile};
use sha2::{Digest, Sha256};

use crate::support;
use crate::support::cli::bin;
use crate::support::codec::cpu;

const READ_BACK: &str = r#"
import hashlib, json, sys
import numpy as np
from safetensors.numpy import load_file
out = {}
for path in sys.argv[1:]:
    arrays = {"": np.load(path)} if path.endswith(".npy") else load_file(path)
    for name, a in arrays.items():
        out[path + ":" + name] = [str(a.dtype), list(a.shape), hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()]
json.dump(out, sys.stdout)
"#;

fn expected(file: &GgufFile, name: &str, dtype: DType) -> (Vec<usize>, String) {
    let t = file.tensor(name).unwrap();
    let out = cpu(t.format, file.tensor_data(t), dtype);
    let shape = t.dims.iter().rev().map(|&d| d as usize).collect();
    (shape, format!("{:x}", Sha256::digest(&out)))
}

#[test]
fn dequant_read_back_by_numpy_and_safetensors() {
    const TEST: &str = "dequant_read_back_by_numpy_and_safetensors";
    let Some(model) = support::model_file(TEST, support::MODEL_FILES[0]) else {
        return;
    };
    let Some(python) = support::python(TEST) else {
        return;
    };
    let file = GgufFile::open(&model).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    let mut want = BTreeMap::new();

    let st = dir.path().join("all.safetensors");
    let status = bin()
        .args([
            "dequant",
            model.to_str().unwrap(),
            "--quiet",
            "--dtype",
            "f16",
            "--out",
            st.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    for t in file.tensors() {
        let (shape, hash) = expected(&file, &t.name, DType::F16);
        want.insert(
            format!("{}:{}", st.display(), t.name),
            ("float16", shape, hash),
        );
    }
    outputs.push(st);

    for (name, dtype, np) in [
        ("blk.0.attn_q.weight", DType::F32, "float32"),
        ("token_embd.weight", DType::F16, "float16"),
    ] {
        let npy = dir.path().join(format!("{name}.{dtype}.npy"));
        let status = bin()
            .args([
                "dequant",
                model.to_str().unwrap(),
                "-q",
                "--tensor",
                name,
                "--dtype",
                dtype.name(),
                "--out",
                npy.to_str().unwrap(),
            ])
            .status()
            .unwrap();
        assert!(status.success());
        let (shape, hash) = expected(&file, name, dtype);
        want.insert(format!("{}:", npy.display()), (np, shape, hash));
        outputs.push(npy);
    }

    let out = Command::new(&python)
        .arg("-c")
        .arg(READ_BACK)
        .args(&outputs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: BTreeMap<String, (String, Vec<usize>, String)> =
        serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got.len(), want.len());
    for (key, (dtype, shape, hash)) in &want {
        let g = &got[key];
        assert_eq!((g.0.as_str(), &g.1, &g.2), (*dtype, shape, hash), "{key}");
    }
}

//! The real PyPI models on the GPU: every tensor of a format with a shader decodes on lavapipe
//! Vulkan and llvmpipe GL (or whatever adapters the machine has) exactly like the CPU codecs, and
//! `dequant --backend vulkan|gl` writes the same file as `--backend cpu`.

use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::{cpu, DType, GgufFile};

use crate::gpu_test;
use crate::support;
use crate::support::gpu::label;

fn real_model_tensors_gpu_equal_cpu(engine: &GpuEngine) {
    const TEST: &str = "real_model_tensors_gpu_equal_cpu";
    let backend = label(engine);
    for model in support::MODEL_FILES {
        let Some(path) = support::model_file(TEST, model) else {
            return;
        };
        let file = GgufFile::open(&path).unwrap();
        let mut checked = 0;
        for t in file.tensors() {
            if !t.format.has_shader() {
                continue;
            }
            let src = file.tensor_data(t);
            for dtype in [DType::F32, DType::F16] {
                let gpu = engine.dequant(t.format, src, dtype).unwrap();
                let mut want = vec![0u8; gpu.len()];
                cpu::dequant_to_bytes(t.format, src, dtype, &mut want).unwrap();
                if let Some(i) = gpu.iter().zip(&want).position(|(a, b)| a != b) {
                    panic!(
                        "{backend} {model}: {} ({}, {dtype}) differs at byte {i}",
                        t.name, t.format
                    );
                }
            }
            checked += 1;
        }
        eprintln!("[{TEST}] {backend} {model}: {checked} tensors equal");
        assert!(checked > 0);
    }
}
gpu_test!(
    real_model_tensors_gpu_equal_cpu,
    real_model_tensors_gpu_equal_cpu
);

#[cfg(feature = "cli")]
#[test]
fn dequant_command_same_bits_on_every_backend() {
    const TEST: &str = "dequant_command_same_bits_on_every_backend";
    let Some(model) = support::model_file(TEST, support::MODEL_FILES[1]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = |backend: &str| -> Option<Vec<u8>> {
        let out = dir.path().join(format!("{backend}.safetensors"));
        let o = support::cli::bin()
            .args([
                "dequant",
                model.to_str().unwrap(),
                "-q",
                "--dtype",
                "f16",
                "--backend",
                backend,
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            if backend != "cpu"
                && err.contains("no ")
                && err.contains("adapter")
                && !support::is_ci()
            {
                eprintln!("\n*** SKIPPED [{TEST}] on {backend}: {err} ***\n");
                return None;
            }
            panic!("--backend {backend}: {err}");
        }
        Some(std::fs::read(&out).unwrap())
    };
    let cpu = run("cpu").unwrap();
    for backend in ["vulkan", "gl"] {
        if let Some(gpu) = run(backend) {
            assert!(
                gpu == cpu,
                "--backend {backend} wrote different bytes than --backend cpu"
            );
        }
    }
}

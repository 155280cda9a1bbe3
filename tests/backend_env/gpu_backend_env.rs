//! An explicit backend picks its API, whatever `GGUF_DEQUANT_BACKEND` says (the command line reads
//! that variable, the library does not); a backend with no adapter is a typed error, not a panic.
//! One test (the variable is process-wide).

use gguf_dequant::gpu::{list_adapters, GpuEngine, GpuError};
use gguf_dequant::Backend;

use crate::support::gpu as gpu_support;

#[test]
fn backend_env_variable_and_missing_backends() {
    let adapters = list_adapters();
    eprintln!(
        "adapters: {:#?}",
        adapters
            .iter()
            .map(|a| (&a.info.name, a.info.backend))
            .collect::<Vec<_>>()
    );

    // The library reads no environment variable: a bogus GGUF_DEQUANT_BACKEND changes nothing.
    std::env::set_var("GGUF_DEQUANT_BACKEND", "bogus");
    if let Some(engine) =
        gpu_support::engine(Backend::Vulkan, "explicit vulkan", Default::default())
    {
        assert_eq!(engine.adapter_info().backend, wgpu::Backend::Vulkan);
    }
    if let Some(engine) = gpu_support::engine(Backend::Gl, "explicit gl", Default::default()) {
        assert_eq!(engine.adapter_info().backend, wgpu::Backend::Gl);
    }
    std::env::remove_var("GGUF_DEQUANT_BACKEND");

    // The CPU is no GPU backend.
    let err = GpuEngine::new(Backend::Cpu).unwrap_err();
    assert!(
        matches!(err, gguf_dequant::Error::Gpu(GpuError::NoAdapter { .. })),
        "{err}"
    );
    // Metal and DX12 do not exist on Linux: a typed error naming what was seen.
    if cfg!(target_os = "linux") {
        for b in [Backend::Metal, Backend::Dx12] {
            let err = GpuEngine::new(b).unwrap_err();
            assert!(
                matches!(err, gguf_dequant::Error::Gpu(GpuError::NoAdapter { .. })),
                "{err}"
            );
        }
    }
}

/// The command line reads `GGUF_DEQUANT_BACKEND` when `--backend` is not given: a bad name is one
/// error line naming the variable, `gl` and `Vulkan` put `selftest` on that API, and an explicit
/// `--backend` wins over the variable. Every child gets its own environment, so this test does not
/// race the one above.
#[cfg(feature = "cli")]
#[test]
fn cli_reads_the_backend_env_variable() {
    const TEST: &str = "cli_reads_the_backend_env_variable";
    let run = |env: Option<&str>, args: &[&str]| {
        let mut cmd = crate::support::cli::bin();
        cmd.args(args);
        match env {
            Some(v) => cmd.env("GGUF_DEQUANT_BACKEND", v),
            None => cmd.env_remove("GGUF_DEQUANT_BACKEND"),
        };
        cmd.output().unwrap()
    };
    let json_backend = |o: &std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        json["backend"].as_str().unwrap().to_string()
    };

    // A name that is no backend, and one this command does not take: one line, exit 1.
    for (value, args) in [
        ("bogus", &["selftest", "--json"][..]),
        ("bogus", &["bench", "--types", "I32", "--json", "-"][..]),
        ("cpu", &["selftest", "--json"][..]),
        ("all", &["verify", "missing.gguf"][..]),
    ] {
        let o = run(Some(value), args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{value} {args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{value} {args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(
            err.contains(&format!("GGUF_DEQUANT_BACKEND={value}")),
            "{value} {args:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{value} {args:?}");
    }

    let gl = gpu_support::engine(Backend::Gl, TEST, Default::default()).is_some();
    let vulkan = gpu_support::engine(Backend::Vulkan, TEST, Default::default()).is_some();
    for (value, want, have) in [("gl", "gl", gl), ("Vulkan", "vulkan", vulkan)] {
        if have {
            let o = run(Some(value), &["selftest", "--json"]);
            assert_eq!(json_backend(&o), want, "GGUF_DEQUANT_BACKEND={value}");
        }
    }
    // An explicit --backend wins over the variable, a bad one included.
    if gl {
        let o = run(Some("bogus"), &["selftest", "--backend", "gl", "--json"]);
        assert_eq!(json_backend(&o), "gl");
    }
    if gl && vulkan {
        let o = run(Some("gl"), &["selftest", "--backend", "vulkan", "--json"]);
        assert_eq!(json_backend(&o), "vulkan");
        let o = run(Some("vulkan"), &["selftest", "--backend", "gl", "--json"]);
        assert_eq!(json_backend(&o), "gl");
    }
    // Empty is unset.
    let o = run(Some(" "), &["bench", "--types", "I32", "--json", "-"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

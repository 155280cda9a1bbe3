//! `GGUF_DEQUANT_BACKEND` steers `Backend::Auto`; an explicit backend wins; a bad name and a
//! backend with no adapter are typed errors, not panics. One test (the variable is process-wide).

use gguf_dequant::gpu::{list_adapters, Backend, GpuEngine, GpuError, BACKEND_ENV};

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

    std::env::set_var(BACKEND_ENV, "bogus");
    let err = GpuEngine::new(Backend::Auto).unwrap_err();
    assert!(
        matches!(err, gguf_dequant::Error::Gpu(GpuError::UnknownBackend(_))),
        "{err}"
    );

    for (name, want) in [("gl", wgpu::Backend::Gl), ("Vulkan", wgpu::Backend::Vulkan)] {
        std::env::set_var(BACKEND_ENV, name);
        let test = format!("GGUF_DEQUANT_BACKEND={name}");
        if let Some(engine) = gpu_support::engine(
            Backend::Auto,
            &test,
            gguf_dequant::gpu::EngineOptions::default(),
        ) {
            assert_eq!(engine.adapter_info().backend, want);
        }
    }
    // An explicit backend ignores the variable.
    std::env::set_var(BACKEND_ENV, "bogus");
    if let Some(engine) = gpu_support::engine(Backend::Gl, "explicit gl", Default::default()) {
        assert_eq!(engine.adapter_info().backend, wgpu::Backend::Gl);
    }
    std::env::remove_var(BACKEND_ENV);

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

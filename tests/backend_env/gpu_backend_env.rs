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

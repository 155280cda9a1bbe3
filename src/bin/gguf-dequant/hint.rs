//! The command line's hints: the library's own ([`gguf_dequant::Error::hint`], which names no
//! flag or command), with what to type here added where there is something.

use gguf_dequant::gpu::GpuError;
use gguf_dequant::Error;

/// The hint to print after `e`'s one-line message, if any.
pub fn hint(e: &Error) -> Option<String> {
    let lib = e.hint()?;
    Some(match e {
        Error::Gpu(GpuError::NoAdapter { .. } | GpuError::RequestDevice { .. }) => format!(
            "{lib} with --backend or GGUF_DEQUANT_BACKEND; `gguf-dequant adapters` lists what \
             wgpu sees"
        ),
        Error::Gpu(GpuError::TooLarge { .. }) => {
            format!("{lib} (`gguf-dequant adapters` lists their limits)")
        }
        Error::NoSuchTensor { .. } | Error::Selection { .. } => {
            "list the tensor names with `gguf-dequant inspect`".to_string()
        }
        _ => lib.to_string(),
    })
}

/// [`gguf_dequant::error::NO_ADAPTER_HINT`] as the command line says it.
pub fn no_adapter() -> String {
    format!(
        "{} with --backend or GGUF_DEQUANT_BACKEND",
        gguf_dequant::error::NO_ADAPTER_HINT
    )
}

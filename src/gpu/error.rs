//! From wgpu's errors to [`GpuError`]: error scopes around every call that can fail.

pub use crate::error::GpuError;

impl GpuError {
    /// Converts an error popped from an error scope or seen by the uncaptured-error handler.
    pub(crate) fn from_wgpu(what: &str, e: wgpu::Error) -> GpuError {
        let what = what.to_string();
        match e {
            wgpu::Error::OutOfMemory { source } => GpuError::OutOfMemory {
                what,
                message: source.to_string(),
            },
            wgpu::Error::Validation { description, .. } => GpuError::Validation {
                what,
                message: description,
            },
            wgpu::Error::Internal { description, .. } => GpuError::Internal {
                what,
                message: description,
            },
        }
    }
}

/// Runs `f` inside out-of-memory, validation and internal error scopes and turns what they caught
/// into a [`GpuError`] naming `what`.
pub(crate) fn scoped<T>(
    device: &wgpu::Device,
    what: &str,
    f: impl FnOnce() -> T,
) -> Result<T, GpuError> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let out = f();
    let e_internal = pollster::block_on(internal.pop());
    let e_validation = pollster::block_on(validation.pop());
    let e_oom = pollster::block_on(oom.pop());
    match e_oom.or(e_validation).or(e_internal) {
        Some(e) => Err(GpuError::from_wgpu(what, e)),
        None => Ok(out),
    }
}

//! Typed GPU errors: everything the engine can report instead of panicking.

use crate::{DType, Format};

/// A GPU failure, wrapped by [`crate::Error::Gpu`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No adapter of the requested backend can run compute shaders.
    #[error("no {backend} GPU adapter with compute shaders found (adapters seen: {seen})")]
    NoAdapter {
        /// The backend asked for.
        backend: String,
        /// The adapters that were found but not usable, or `none`.
        seen: String,
    },
    /// The adapter refused to create a device.
    #[error("{adapter}: requesting a device failed: {reason}")]
    RequestDevice {
        /// The adapter's name and backend.
        adapter: String,
        /// wgpu's reason.
        reason: String,
    },
    /// The format (or output dtype) has no GPU shader; decode it on the CPU.
    #[error("{format} to {dtype} has no GPU shader (decode it on the CPU)")]
    Unsupported {
        /// The format.
        format: Format,
        /// The output dtype.
        dtype: DType,
    },
    /// A wgpu validation error: a bug in the engine, or a caller buffer that breaks the rules.
    #[error("GPU validation error while {what}: {message}")]
    Validation {
        /// What the engine was doing.
        what: String,
        /// wgpu's description.
        message: String,
    },
    /// The device ran out of memory.
    #[error("GPU out of memory while {what}: {message}")]
    OutOfMemory {
        /// What the engine was doing.
        what: String,
        /// wgpu's description.
        message: String,
    },
    /// An internal error of wgpu or the driver (e.g. a shader the driver failed to compile).
    #[error("GPU internal error while {what}: {message}")]
    Internal {
        /// What the engine was doing.
        what: String,
        /// wgpu's description.
        message: String,
    },
    /// An error that no error scope caught, recorded by the uncaptured-error handler.
    #[error("GPU error: {0}")]
    Uncaptured(String),
    /// The device was lost (driver reset, removal, or destroyed).
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// The GPU did not finish within the engine's timeout.
    #[error("GPU work did not finish within {0:?}")]
    Timeout(std::time::Duration),
    /// Mapping a readback buffer failed.
    #[error("mapping a GPU readback buffer failed: {0}")]
    Map(String),
    /// The binding-size limit is too small for even one window of the format.
    #[error("{format}: a storage binding of {limit} bytes cannot hold one aligned window of {step_blocks} blocks")]
    LimitTooSmall {
        /// The format.
        format: Format,
        /// The binding-size limit in use.
        limit: u64,
        /// The smallest window that keeps offsets aligned, in blocks.
        step_blocks: u64,
    },
    /// Device limits (or forced ones) that no window plan can satisfy: an offset alignment of 0,
    /// or one so large that the step of aligned blocks does not fit in 64 bits.
    #[error("unusable GPU limits: {0}")]
    InvalidLimits(String),
    /// A request that cannot fit the device's limits whatever is split: one aligned run of
    /// blocks needs a bigger buffer than the largest allowed. Reported before anything is
    /// allocated or sent.
    #[error("{what}: needs a buffer of {bytes} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// What needed the buffer.
        what: String,
        /// Bytes of the smallest buffer that would do.
        bytes: u64,
        /// The buffer-size limit in use.
        limit: u64,
    },
    /// A caller-owned buffer or offset breaks a rule of [`super::GpuEngine::record`].
    #[error("invalid dequant job: {0}")]
    InvalidJob(String),
}

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

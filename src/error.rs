//! The crate's error type.

use std::path::PathBuf;

use crate::dtype::DType;
use crate::formats::Format;
use crate::gguf::GgufError;

/// How to get a GPU adapter: the hint of [`Error::hint`] for a missing or unusable adapter.
/// (The command line adds its own flag and command; the library names none.)
pub const NO_ADAPTER_HINT: &str =
    "install a Vulkan or GL driver (e.g. Mesa's lavapipe: Debian/Ubuntu \
     apt-get install mesa-vulkan-drivers) or pick another backend";

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in this crate, each naming what and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The GGUF file is malformed, hostile or unsupported.
    #[error("{path}: {source}")]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, and where.
        #[source]
        source: GgufError,
    },
    /// A split GGUF set is not whole or not consistent; `path` is the shard at fault.
    #[error("{path}: {source}")]
    Split {
        /// The shard.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: crate::gguf::SplitError,
    },
    /// An operating-system error on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Source bytes are not a whole number of blocks of the format.
    #[error("{format}: {len} bytes is not a whole number of {block_bytes}-byte blocks")]
    PartialBlock {
        /// The format.
        format: Format,
        /// The source length in bytes.
        len: usize,
        /// Bytes per block of the format.
        block_bytes: usize,
    },
    /// A destination slice does not have the size the source needs.
    #[error("{format}: destination holds {got} values, the source decodes to {expected}")]
    DestinationSize {
        /// The format.
        format: Format,
        /// Values the source decodes to.
        expected: usize,
        /// Values the destination holds.
        got: usize,
    },
    /// The requested tensor is not in the file.
    #[error("{path}: no tensor named {name:?}")]
    NoSuchTensor {
        /// The file.
        path: PathBuf,
        /// The requested name.
        name: String,
    },
    /// The output cannot hold what was asked for (wrong tensor count, unsupported dtype, ...).
    #[error("{path}: {reason}")]
    Output {
        /// The output path.
        path: PathBuf,
        /// Why it cannot be written.
        reason: String,
    },
    /// A decoder returned a different number of bytes than the output expects.
    #[error("decoded {got} bytes where {expected} were expected")]
    DecodedSize {
        /// Bytes expected.
        expected: usize,
        /// Bytes produced.
        got: usize,
    },
    /// A host allocation failed.
    #[error("out of host memory allocating {bytes} bytes for {what:?}")]
    OutOfMemory {
        /// Bytes requested.
        bytes: usize,
        /// What they were for.
        what: String,
    },
    /// Shapes or indices that do not fit an operation of [`crate::ops`] (K, rows, batch, ids, x).
    #[error("invalid shape: {0}")]
    InvalidShape(String),
    /// A backend name that is not one of [`crate::Backend`]'s.
    #[error("unknown backend `{0}` (expected auto, all, vulkan, gl, metal, dx12 or cpu)")]
    UnknownBackend(String),
    /// A GPU failure (adapter, device, shader, buffer, timeout): see [`GpuError`].
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// The file changed (size, modification time or contents) after it was opened and mapped, or
    /// while it was being loaded: what was read may be torn.
    #[error("{path}: the file changed while it was in use: {reason}")]
    FileChanged {
        /// The file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
    /// A tensor selection that cannot be satisfied: a bad glob, or a pattern that matches nothing.
    #[error("{path}: {reason}")]
    Selection {
        /// The file the selection was applied to.
        path: PathBuf,
        /// What is wrong with the selection.
        reason: String,
    },
    /// A placement over several devices that cannot be applied: no device, an input or output
    /// device past the split, shares that are negative, not finite or all zero, or a split whose
    /// length is not the number of devices.
    #[error("invalid placement: {reason}")]
    Placement {
        /// What is wrong with it.
        reason: String,
    },
    /// A device's budget of a placement over several devices cannot hold what the placement puts
    /// there. Reported before anything is allocated on any device.
    #[error("device {device}: {what} need {needed} bytes, over its budget of {budget} bytes")]
    OverBudget {
        /// The device (its index in the placement).
        device: usize,
        /// What had to go there.
        what: String,
        /// Bytes that would be resident there.
        needed: u64,
        /// The device's budget in bytes.
        budget: u64,
    },
}

impl Error {
    /// [`Error::PartialBlock`] for `len` bytes of `format`.
    pub fn partial_block(format: Format, len: usize) -> Error {
        Error::PartialBlock {
            format,
            len,
            block_bytes: format.block_bytes(),
        }
    }

    /// A one-line suggestion for what to do about this error, where there is a useful one (out of
    /// GPU memory, device lost, no adapter, a file that changed, a tensor not found). It names
    /// the library's own API where it names any; a program adds its own flags and commands.
    pub fn hint(&self) -> Option<&'static str> {
        Some(match self {
            Error::Gpu(GpuError::OutOfMemory { .. }) => {
                "load fewer tensors (a name or glob selection), keep them raw or as f16/bf16 instead of f32, lower the staging budget, or free other GPU memory"
            }
            Error::Gpu(GpuError::DeviceLost(_)) => {
                "the GPU device is gone (driver reset, removal, or destroyed): create a new device or loader and load again"
            }
            Error::Gpu(GpuError::NoAdapter { .. }) | Error::Gpu(GpuError::RequestDevice { .. }) => {
                NO_ADAPTER_HINT
            }
            Error::Gpu(GpuError::TooLarge { .. }) => {
                "the device cannot hold this request: select fewer tensors, keep them raw or as f16, or use an adapter with larger buffer limits"
            }
            Error::Gpu(GpuError::InvalidLimits(_)) => {
                "the adapter reports impossible limits: update its driver or pick another adapter"
            }
            Error::Gpu(GpuError::Timeout(_)) => {
                "the GPU is too slow or hung: raise EngineOptions::timeout or use a faster adapter"
            }
            Error::FileChanged { .. } => {
                "something wrote to or replaced the file while it was open: reopen it, and load from a copy that nothing else writes to"
            }
            Error::Split { .. } => {
                "open a split set by its first shard (NAME-00001-of-NNNNN.gguf), with every shard of that set, and nothing else named like one, beside it"
            }
            Error::NoSuchTensor { .. } | Error::Selection { .. } => {
                "the file's tensor names are in its tensor table (GgufFile::tensors)"
            }
            Error::OutOfMemory { .. } => "free host memory or lower the staging budget",
            Error::OverBudget { .. } => {
                "raise the budgets, add a device, keep the tensors raw or as f16/bf16, or load fewer tensors"
            }
            _ => return None,
        })
    }
}

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
    /// A job breaks a rule of the engine: a caller-owned buffer or offset of `GpuEngine::record`, or
    /// a shape, batch, id or buffer of an inference kernel (`gpu::kernels`).
    #[error("invalid GPU job: {0}")]
    InvalidJob(String),
    /// An engine option outside what the engine takes (`EngineOptions`).
    #[error("invalid engine option: {0}")]
    InvalidOption(String),
    /// An internal invariant of the engine did not hold: a bug in gguf-dequant, never the
    /// caller's input. Please report it with the message.
    #[error("internal error (a bug in gguf-dequant): {0}")]
    Invariant(String),
}

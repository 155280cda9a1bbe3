//! The crate's error type.

use std::path::PathBuf;

use crate::formats::Format;
use crate::gguf::GgufError;
use crate::gpu::GpuError;

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
    /// A GPU failure (adapter, device, shader, buffer, timeout): see [`GpuError`].
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

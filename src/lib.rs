//! gguf-dequant: GGUF model weights, dequantised on the GPU by WGSL compute shaders and checked
//! bit-for-bit against CPU reference codecs that match ggml.
//!
//! * [`gguf`] reads (and writes) GGUF files: a hardened, memory-mapped, zero-copy reader.
//! * [`formats`] is the registry of all 36 live ggml tensor types with their CPU codecs.
//! * [`cpu`] drives the codecs over whole tensors, on all cores.
//! * [`output`] writes decoded tensors as safetensors, `.npy` or raw little-endian files.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod cpu;
pub mod dequant;
pub mod dtype;
pub mod error;
pub mod formats;
pub mod gguf;
pub mod gpu;
pub mod inspect;
pub mod output;

pub use dtype::DType;
pub use error::{Error, Result};
pub use formats::Format;
pub use gguf::GgufFile;

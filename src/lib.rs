//! gguf-dequant: GGUF model weights, dequantised on the GPU by WGSL compute shaders and checked
//! bit-for-bit against CPU reference codecs that match ggml.
//!
//! * [`gguf`] reads (and writes) GGUF files: a hardened, memory-mapped, zero-copy reader.
//! * [`formats`] is the registry of all 36 live ggml tensor types with their CPU codecs.
//! * [`cpu`] drives the codecs over whole tensors, on all cores.
//! * [`output`] writes decoded tensors as safetensors, `.npy` or raw little-endian files.
//! * [`gpu`] dequantises on the GPU; [`gpu::loader`] streams tensors into GPU-resident buffers
//!   for inference engines (raw or dequantised, on the library's adapter or the caller's device).
//!
//! ```no_run
//! use gguf_dequant::{cpu, GgufFile};
//!
//! let file = GgufFile::open("model.gguf")?; // memory-mapped, fully validated
//! for t in file.tensors() {
//!     println!("{} {} {:?}", t.name, t.format, t.dims);
//! }
//! let t = file.tensor("blk.0.attn_q.weight").expect("tensor exists");
//! let raw: &[u8] = file.tensor_data(t); // zero-copy raw blocks
//! let values: Vec<f32> = cpu::dequant_f32(t.format, raw)?; // all cores, bit-exact with ggml
//! # let _ = values;
//! # Ok::<(), gguf_dequant::Error>(())
//! ```
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod backend;
#[cfg(feature = "gpu")]
pub mod bench;
pub mod cpu;
#[cfg(feature = "output")]
pub mod dequant;
pub mod dtype;
pub mod error;
pub mod formats;
pub mod gguf;
#[cfg(feature = "gpu")]
pub mod gpu;
#[cfg(feature = "output")]
pub mod output;
pub mod select;
pub mod selftest;
pub mod verify;

pub use backend::Backend;
pub use dtype::DType;
pub use error::{Error, Result};
pub use formats::Format;
pub use gguf::GgufFile;
pub use select::Selection;

#![cfg_attr(feature = "gpu", doc = include_str!("../README.md"))]
#![cfg_attr(
    not(feature = "gpu"),
    doc = "gguf-dequant built without the `gpu` feature: the GGUF reader and writer ([`gguf`]), \
           the format registry ([`formats`]), the CPU codecs ([`cpu`]), the CPU reference of the \
           inference kernels ([`ops`]), the tensor selection ([`Selection`]) and the WGSL side of \
           [`gpu`]: the composed shader sources and the kernels' registry and ABI. The crate's \
           README, which is these docs with the default features, describes the whole crate."
)]
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
pub mod gpu;
pub mod npy;
pub mod ops;
#[cfg(feature = "output")]
pub mod output;
pub mod select;
pub mod selftest;
pub mod sys;
pub mod verify;

pub use backend::Backend;
pub use dtype::DType;
pub use error::{Error, Result};
pub use formats::Format;
pub use gguf::GgufFile;
pub use select::Selection;

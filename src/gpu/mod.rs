//! The GPU engine: raw GGUF blocks uploaded untouched into wgpu storage buffers and dequantised by
//! one WGSL compute shader per format, bit-exact with the CPU codecs.
//!
//! [`GpuEngine`] is the entry point (its docs have an example).
//!
//! * **Output.** `DType::F32`, `F16` and `BF16`, as little-endian bytes. f16 and bf16 are the
//!   round-to-nearest-even of the f32 value, computed on the GPU with integer operations (the
//!   same rounding as the `half` crate, which the CPU path uses), so every dtype is bit-exact.
//! * **Exactness.** Every shader is bit-identical to the CPU codec on every adapter: scales are
//!   decoded with integer operations; each value is one correctly rounded multiply whose product
//!   is exact, or (Q4_1, Q5_1) an exact product plus an add, or (the i-quants) a short chain of
//!   multiplies and adds each of which is exact, so FMA contraction cannot change a bit; the only f32 subnormal results (MXFP4 with e = 0 or 1)
//!   are assembled as bits, so GPUs that flush subnormals still match. One-value formats
//!   (F32, F16, BF16, F8_E4M3) never pass through a float operation.
//! * **Errors.** Never a panic: adapter, device, shader, buffer and readback failures are
//!   [`GpuError`]s (wrapped in [`crate::Error::Gpu`]). Pipeline, buffer and dispatch creation run
//!   inside error scopes; an uncaptured-error handler and a device-lost callback record into
//!   shared state that every call checks.
//! * **Big tensors.** Tensors and outputs larger than `max_storage_buffer_binding_size` are
//!   bound in windows (see [`windows`]); [`GpuEngine::dequant`] also submits at most
//!   [`EngineOptions::max_chunk_bytes`] of output at a time.
//!
//! Without the `gpu` feature (no wgpu) this module holds only the WGSL side: the composed shader
//! sources ([`shaders`], [`decode`], [`tables`]) and the kernels' registry, ABI and composed
//! sources ([`kernels`]), so that they are validated where no wgpu is built.

pub mod decode;
pub mod kernels;
pub mod shaders;
pub mod tables;

#[cfg(feature = "gpu")]
pub mod buffers;
#[cfg(feature = "gpu")]
pub mod device;
#[cfg(feature = "gpu")]
mod engine;
#[cfg(feature = "gpu")]
mod error;
#[cfg(feature = "gpu")]
pub mod loader;
#[cfg(feature = "gpu")]
pub mod pipelines;
#[cfg(feature = "gpu")]
pub mod roofline;
#[cfg(feature = "gpu")]
pub mod timing;
#[cfg(feature = "gpu")]
pub mod tune;
pub mod windows;

pub use crate::error::GpuError;
#[cfg(feature = "gpu")]
pub use device::{compute_adapters, list_adapters, AdapterDetails, Capabilities};
#[cfg(feature = "gpu")]
pub use engine::{DequantJob, EngineOptions, GpuEngine};
#[cfg(feature = "gpu")]
pub(crate) use error::scoped;
#[cfg(feature = "gpu")]
pub use pipelines::{binding, PipelineKey, Variant};
pub use windows::{plan_windows, WindowPlan};

#[cfg(feature = "gpu")]
pub use crate::Backend;

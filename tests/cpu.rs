//! The tests that need no GPU: the CPU codecs against the spec, the oracles and ggml; the GGUF
//! reader and writer, malformed files; output, verify's comparison, the selftest digests, the
//! lookup tables and the CPU reference of the inference kernels (`ops`); the inference kernels'
//! ABI, and every dequantiser and kernel variant's WGSL through naga. This binary must build without wgpu: of
//! `gguf_dequant::gpu` it uses only the WGSL side that builds without the `gpu` feature
//! (`gpu::kernels`' registry, ABI and sources), and never `gpu::loader` or `gguf_dequant::bench`.
//!
//! One binary, one module per topic in `tests/cpu/<topic>.rs` (a crate root's `mod x;` would look
//! in `tests/`, hence the `#[path]`s); shared helpers in `tests/support/`.

pub mod support;

// examples/generate's tokenizer and model description, compiled in.
#[allow(dead_code)]
#[path = "../examples/generate/arch/mod.rs"]
mod arch;
#[allow(dead_code)]
#[path = "../examples/generate/model.rs"]
mod model;
#[allow(dead_code)]
#[path = "../examples/generate/tokenizer.rs"]
mod tokenizer;

#[path = "cpu/codec_blocks.rs"]
mod codec_blocks;
#[path = "cpu/codec_driver.rs"]
mod codec_driver;
#[path = "cpu/codec_scalars.rs"]
mod codec_scalars;
#[path = "cpu/generate_inputs.rs"]
mod generate_inputs;
#[path = "cpu/gguf_reject.rs"]
mod gguf_reject;
#[path = "cpu/gguf_roundtrip.rs"]
mod gguf_roundtrip;
#[path = "cpu/gguf_split.rs"]
mod gguf_split;
#[path = "cpu/kernel_abi.rs"]
mod kernel_abi;
#[path = "cpu/kernel_plan.rs"]
mod kernel_plan;
#[path = "cpu/kernel_shaders.rs"]
mod kernel_shaders;
#[path = "cpu/ops.rs"]
mod ops;
#[path = "cpu/oracle_codecs.rs"]
mod oracle_codecs;
#[path = "cpu/oracle_models.rs"]
mod oracle_models;
#[cfg(feature = "output")]
#[path = "cpu/output.rs"]
mod output;
#[path = "cpu/selftest_digests.rs"]
mod selftest_digests;
#[path = "cpu/shaders_layout_sync.rs"]
mod shaders_layout_sync;
#[path = "cpu/shaders_validate.rs"]
mod shaders_validate;
#[path = "cpu/tables.rs"]
mod tables;
#[path = "cpu/tokenizer.rs"]
mod tokenizer_ids;
#[path = "cpu/verify.rs"]
mod verify;

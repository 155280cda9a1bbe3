//! The tests that need wgpu: the pipelines on the noop device, GPU output against the CPU codecs
//! and the inference kernels against the f64 reference on every adapter, the real
//! models and ggml's quantiser output on the GPU, the weight-loading service, one model over
//! several devices, faults and concurrency.
//!
//! One binary, one module per topic in `tests/gpu/<topic>.rs` (a crate root's `mod x;` would look
//! in `tests/`, hence the `#[path]`s); shared helpers in `tests/support/`. Tests that run on an
//! adapter are registered with `gpu_test!` (`tests/support/gpu.rs`).
#![cfg(feature = "gpu")]

pub mod support;

// examples/generate's engine, compiled in (its main.rs is the command line only).
#[allow(dead_code)]
#[path = "../examples/generate/arch/mod.rs"]
mod arch;
#[allow(dead_code)]
#[path = "../examples/generate/gpu.rs"]
mod gpu;
#[allow(dead_code)]
#[path = "../examples/generate/model.rs"]
mod model;
#[allow(dead_code)]
#[path = "../examples/generate/reference.rs"]
mod reference;
#[allow(dead_code)]
#[path = "../examples/generate/tokenizer.rs"]
mod tokenizer;

#[path = "gpu/adapters.rs"]
mod adapters;
#[path = "gpu/concurrency.rs"]
mod concurrency;
#[path = "gpu/faults.rs"]
mod faults;
#[path = "gpu/generate.rs"]
mod generate;
#[path = "gpu/gpu_kquant.rs"]
mod gpu_kquant;
#[path = "gpu/gpu_models.rs"]
mod gpu_models;
#[path = "gpu/gpu_pipelines_noop.rs"]
mod gpu_pipelines_noop;
#[path = "gpu/gpu_throughput.rs"]
mod gpu_throughput;
#[path = "gpu/gpu_vs_cpu.rs"]
mod gpu_vs_cpu;
#[path = "gpu/kernels.rs"]
mod kernels;
#[path = "gpu/multi.rs"]
mod multi;
#[path = "gpu/oracle_quantized.rs"]
mod oracle_quantized;
#[path = "gpu/precision.rs"]
mod precision;
#[path = "gpu/recorder.rs"]
mod recorder;
#[path = "gpu/service.rs"]
mod service;
#[path = "gpu/split_sets.rs"]
mod split_sets;
#[path = "gpu/tuner.rs"]
mod tuner;
#[path = "gpu/validation.rs"]
mod validation;

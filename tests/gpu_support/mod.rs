//! Shared helpers of the GPU tests: adapters that never skip silently, random blocks with finite
//! scales, and a bit-for-bit comparison that names the block and element of the first mismatch.
#![allow(dead_code)]

use gguf_dequant::gpu::{Backend, EngineOptions, GpuEngine};
use gguf_dequant::{DType, Format};

/// The engine on `backend`, or `None` after a loud SKIPPED line; with `CI=true` a missing adapter
/// fails the test instead.
pub fn engine(backend: Backend, test: &str, options: EngineOptions) -> Option<GpuEngine> {
    match GpuEngine::with_options(backend, options) {
        Ok(e) => {
            let info = e.adapter_info();
            eprintln!(
                "[{test}] {backend}: adapter `{}` ({:?}, {:?}, driver `{}` {}); storage binding {} B, offset alignment {} B, buffer {} B",
                info.name,
                info.backend,
                info.device_type,
                info.driver,
                info.driver_info,
                e.max_binding_size(),
                e.offset_alignment(),
                e.limits().max_buffer_size
            );
            Some(e)
        }
        Err(err) => {
            if matches!(std::env::var("CI").as_deref(), Ok("true") | Ok("1")) {
                panic!("[{test}] {backend}: no adapter and CI=true: {err}");
            }
            eprintln!("\n*** SKIPPED [{test}] on {backend}: no adapter: {err} ***\n");
            None
        }
    }
}

/// splitmix64: deterministic bytes without a dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn fill(&mut self, b: &mut [u8]) {
        for x in b.iter_mut() {
            *x = self.next() as u8;
        }
    }
}

/// `n_blocks` random blocks of `format` whose f16/f32 scale fields are finite (the validator of
/// ggml rejects other blocks). One-value formats keep every bit pattern, NaN and Inf included.
pub fn random_blocks(format: Format, n_blocks: usize, seed: u64) -> Vec<u8> {
    gguf_dequant::selftest::finite_blocks(format, n_blocks, seed ^ (format.id() as u64) << 32)
}

fn is_nan(dtype: DType, v: u32) -> bool {
    match dtype {
        DType::F32 => v & 0x7FFF_FFFF > 0x7F80_0000,
        DType::F16 => v & 0x7FFF > 0x7C00,
        DType::BF16 => v & 0x7FFF > 0x7F80,
    }
}

/// The value `i` of little-endian `dtype` bytes, as raw bits.
pub fn value(dtype: DType, bytes: &[u8], i: usize) -> u32 {
    match dtype {
        DType::F32 => u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap()),
        _ => u16::from_le_bytes(bytes[2 * i..2 * i + 2].try_into().unwrap()) as u32,
    }
}

/// Bit-for-bit equality of two decoded buffers (any NaN equals any NaN); the error names the
/// block and element of the first difference and counts the rest.
pub fn compare(format: Format, dtype: DType, gpu: &[u8], cpu: &[u8]) -> Result<(), String> {
    if gpu.len() != cpu.len() {
        return Err(format!(
            "{format} to {dtype}: {} bytes from the GPU, {} from the CPU",
            gpu.len(),
            cpu.len()
        ));
    }
    let n = cpu.len() / dtype.size();
    let mut first = None;
    let mut count = 0;
    for i in 0..n {
        let (g, c) = (value(dtype, gpu, i), value(dtype, cpu, i));
        if g != c && !(is_nan(dtype, g) && is_nan(dtype, c)) {
            count += 1;
            first.get_or_insert((i, g, c));
        }
    }
    match first {
        None => Ok(()),
        Some((i, g, c)) => Err(format!(
            "{format} to {dtype}: {count} of {n} values differ; first: block {} element {}: GPU {g:#x}, CPU {c:#x}",
            i / format.block_elems(),
            i % format.block_elems()
        )),
    }
}

/// The CPU reference bytes.
pub fn cpu(format: Format, src: &[u8], dtype: DType) -> Vec<u8> {
    let n = gguf_dequant::cpu::n_values(format, src.len()).unwrap();
    let mut out = vec![0u8; n * dtype.size()];
    gguf_dequant::cpu::dequant_to_bytes(format, src, dtype, &mut out).unwrap();
    out
}

/// The formats with a shader.
pub fn gpu_formats() -> Vec<Format> {
    Format::ALL
        .iter()
        .copied()
        .filter(|&f| GpuEngine::supports(f))
        .collect()
}

/// Generates one `#[test]` per backend: `vulkan_<name>` and `gl_<name>`, each calling
/// `$body(Backend, test_name)`.
#[macro_export]
macro_rules! per_backend {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn vulkan() {
                ($body)(
                    gguf_dequant::gpu::Backend::Vulkan,
                    concat!(stringify!($name), "::vulkan"),
                );
            }
            #[test]
            fn gl() {
                ($body)(
                    gguf_dequant::gpu::Backend::Gl,
                    concat!(stringify!($name), "::gl"),
                );
            }
        }
    };
}

//! End-to-end GPU throughput (upload, decode, readback) against the CPU codecs on all cores.
//! Ignored by default: `cargo test --test gpu gpu_throughput -- --ignored --nocapture`.

use std::time::Instant;

use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::{DType, Format};

use crate::gpu_test;
use crate::support::codec::{compare, cpu};
use crate::support::gpu::label;
use crate::support::rng::random_blocks;

fn throughput(engine: &GpuEngine) {
    let backend = label(engine);
    for format in [
        Format::Q4_0,
        Format::Q8_0,
        Format::MXFP4,
        Format::NVFP4,
        Format::F16,
    ] {
        let n_blocks = (16 << 20) / format.block_elems(); // 16 Mi values
        let src = random_blocks(format, n_blocks, 1);
        for dtype in [DType::F32, DType::F16] {
            engine
                .dequant(format, &src[..format.block_bytes()], dtype)
                .unwrap(); // compile
            let t = Instant::now();
            let gpu = engine.dequant(format, &src, dtype).unwrap();
            let g = t.elapsed();
            let t = Instant::now();
            let want = cpu(format, &src, dtype);
            let c = t.elapsed();
            compare(format, dtype, &gpu, &want).unwrap();
            eprintln!(
                "{backend}: {format} to {dtype}: 16 Mi values, GPU end-to-end {:.0} ms ({:.2} GB/s out), CPU {:.0} ms",
                g.as_secs_f64() * 1e3,
                gpu.len() as f64 / g.as_secs_f64() / 1e9,
                c.as_secs_f64() * 1e3
            );
        }
    }
}

gpu_test!(
    #[ignore = "timing only"]
    throughput,
    throughput
);

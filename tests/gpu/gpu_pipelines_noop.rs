//! The real pipeline-creation and command-recording code, for every format and dtype, on wgpu's
//! `noop` backend (no GPU): wgpu-core validates each shader against the engine's bind-group
//! layout inside error scopes, and any error fails the test.

use gguf_dequant::gpu::{DequantJob, EngineOptions, GpuEngine};
use gguf_dequant::{DType, Format};

#[test]
fn every_pipeline_builds_and_records_on_the_noop_device() {
    let (device, queue) = wgpu::Device::noop(&wgpu::DeviceDescriptor::default());
    let engine = GpuEngine::from_device(device, queue, EngineOptions::default()).unwrap();
    let src = engine.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 1 << 16,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let dst = engine.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 1 << 20,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let mut failures = Vec::new();
    for &format in Format::ALL {
        for dtype in DType::ALL {
            let prepared = engine.prepare(format, dtype);
            if !format.has_shader() {
                assert!(prepared.is_err(), "{format} has no shader");
                continue;
            }
            if let Err(e) = prepared {
                failures.push(format!("{format} to {dtype}: {e}"));
                continue;
            }
            let mut encoder = engine.device().create_command_encoder(&Default::default());
            let job = DequantJob {
                format,
                dtype,
                src: &src,
                src_offset: 0,
                n_blocks: 100,
                dst: &dst,
                dst_offset: 0,
            };
            if let Err(e) = engine.record(&mut encoder, &job) {
                failures.push(format!("{format} to {dtype}: record: {e}"));
            }
            engine.queue().submit([encoder.finish()]);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

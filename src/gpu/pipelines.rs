//! One explicit bind-group layout for every shader, and a lazily filled cache of compute pipelines
//! keyed by (format, output dtype, variant), each created inside error scopes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{scoped, shaders, GpuError};
use crate::{DType, Format};

/// A shader variant of one (format, dtype) pair. Only the baseline exists today: no capabilities,
/// integer f16 handling. A `SHADER_F16` or subgroup variant would be added here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Variant {
    /// WGSL with no extension and no capability (what `Capabilities::empty()` validates).
    #[default]
    Baseline,
}

/// Cache key of a compute pipeline.
pub type PipelineKey = (Format, DType, Variant);

pub(crate) struct Pipelines {
    pub(crate) bind_group_layout: wgpu::BindGroupLayout,
    layout: wgpu::PipelineLayout,
    cache: Mutex<HashMap<PipelineKey, Arc<wgpu::ComputePipeline>>>,
}

fn storage(binding: u32, read_only: bool, min: u64) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: wgpu::BufferSize::new(min),
        },
        count: None,
    }
}

impl Pipelines {
    pub(crate) fn new(device: &wgpu::Device) -> Result<Pipelines, GpuError> {
        scoped(device, "creating the bind-group layout", || {
            let bind_group_layout =
                device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some("gguf-dequant"),
                    entries: &[
                        storage(0, true, 4),
                        storage(1, false, 16),
                        wgpu::BindGroupLayoutEntry {
                            binding: 2,
                            visibility: wgpu::ShaderStages::COMPUTE,
                            ty: wgpu::BindingType::Buffer {
                                ty: wgpu::BufferBindingType::Uniform,
                                has_dynamic_offset: false,
                                min_binding_size: wgpu::BufferSize::new(16),
                            },
                            count: None,
                        },
                        // The lookup tables of `gpu::tables` (read only; unused by most shaders).
                        storage(3, true, 4),
                    ],
                });
            let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("gguf-dequant"),
                bind_group_layouts: &[Some(&bind_group_layout)],
                immediate_size: 0,
            });
            Pipelines {
                bind_group_layout,
                layout,
                cache: Mutex::new(HashMap::new()),
            }
        })
    }

    /// The pipeline for `key`, compiled on first use.
    pub(crate) fn get(
        &self,
        device: &wgpu::Device,
        key: PipelineKey,
    ) -> Result<Arc<wgpu::ComputePipeline>, GpuError> {
        let (format, dtype, Variant::Baseline) = key;
        if let Some(p) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(p.clone());
        }
        let src = shaders::source(format, dtype).ok_or(GpuError::Unsupported { format, dtype })?;
        let label = format!("gguf-dequant {format} to {dtype}");
        let pipeline = scoped(
            device,
            &format!("compiling the {format} to {dtype} shader"),
            || {
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(&label),
                    source: wgpu::ShaderSource::Wgsl(src.into()),
                });
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&label),
                    layout: Some(&self.layout),
                    module: &module,
                    entry_point: Some("main"),
                    // Every shader writes each word of its workgroup `tile` before the barrier
                    // and reads it only after, so wgpu's zeroing of workgroup memory is dead
                    // work; on GL (llvmpipe) it is one invocation storing the whole tile and cost
                    // up to 10x on the one-value formats (`gguf-dequant bench`).
                    compilation_options: wgpu::PipelineCompilationOptions {
                        zero_initialize_workgroup_memory: false,
                        ..Default::default()
                    },
                    cache: None,
                })
            },
        )?;
        let pipeline = Arc::new(pipeline);
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, pipeline.clone());
        Ok(pipeline)
    }
}

//! One explicit bind-group layout for every shader, and a lazily filled cache of compute pipelines
//! keyed by (format, output dtype, variant), each created inside error scopes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::windows::{DST_ALIGN, SRC_ALIGN};
use super::{scoped, shaders, GpuError};
use crate::{DType, Format};

/// The `@group(0)` binding numbers of every shader: the pipeline layout, the bind groups of
/// [`super::GpuEngine::record`] and the WGSL (`shaders/lib/entry.wgsl`,
/// `shaders/tables/iq_grids.wgsl`) use these, which a test checks against the composed sources.
pub mod binding {
    /// `src: array<u32>`: the raw blocks (read only), bound in windows.
    pub const SRC: u32 = 0;
    /// `dst: array<vec4<u32>>`: the decoded values.
    pub const DST: u32 = 1;
    /// `params: Params`: the window's value and workgroup counts (uniform).
    pub const PARAMS: u32 = 2;
    /// `grids: array<u32>`: the i-quant grids of [`crate::gpu::tables`] (read only).
    pub const GRIDS: u32 = 3;
}

/// Bytes of the `Params` uniform (four u32).
pub const PARAMS_BYTES: u64 = 16;

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
    cache: PipelineCache<PipelineKey>,
}

/// The `Params` uniform's entry (binding [`binding::PARAMS`], [`PARAMS_BYTES`]) of a bind-group
/// layout.
pub(crate) fn params() -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding: binding::PARAMS,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: wgpu::BufferSize::new(PARAMS_BYTES),
        },
        count: None,
    }
}

/// A compute-stage storage-buffer entry of a bind-group layout.
pub(crate) fn storage(binding: u32, read_only: bool, min: u64) -> wgpu::BindGroupLayoutEntry {
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
                        storage(binding::SRC, true, SRC_ALIGN),
                        storage(binding::DST, false, DST_ALIGN),
                        params(),
                        // The lookup tables of `gpu::tables` (read only; unused by most shaders).
                        storage(binding::GRIDS, true, SRC_ALIGN),
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
                cache: PipelineCache::default(),
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
        self.cache.get_or_compile(key, || {
            let src =
                shaders::source(format, dtype).ok_or(GpuError::Unsupported { format, dtype })?;
            compile(
                device,
                &format!("gguf-dequant {format} to {dtype}"),
                src,
                Some(&self.layout),
                "main",
            )
        })
    }
}

/// Compiled pipelines by key, each compiled once on first use.
pub(crate) struct PipelineCache<K> {
    map: Mutex<HashMap<K, Arc<wgpu::ComputePipeline>>>,
}

impl<K> Default for PipelineCache<K> {
    fn default() -> Self {
        PipelineCache {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: std::hash::Hash + Eq> PipelineCache<K> {
    /// The pipeline of `key`, or the one `compile` makes (kept for next time).
    pub(crate) fn get_or_compile<E>(
        &self,
        key: K,
        compile: impl FnOnce() -> Result<wgpu::ComputePipeline, E>,
    ) -> Result<Arc<wgpu::ComputePipeline>, E> {
        let lock = || self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = lock().get(&key) {
            return Ok(p.clone());
        }
        let pipeline = Arc::new(compile()?);
        lock().insert(key, pipeline.clone());
        Ok(pipeline)
    }
}

/// Compiles WGSL `src` into a compute pipeline with entry point `entry` (layout `None`: derived
/// from the shader), inside error scopes.
pub(crate) fn compile(
    device: &wgpu::Device,
    label: &str,
    src: &str,
    layout: Option<&wgpu::PipelineLayout>,
    entry: &str,
) -> Result<wgpu::ComputePipeline, GpuError> {
    scoped(device, &format!("compiling {label}"), || {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(src.into()),
        });
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout,
            module: &module,
            entry_point: Some(entry),
            // Every shader and kernel writes its workgroup memory before the barrier that
            // precedes a read, so wgpu's zeroing of workgroup memory is dead work; on GL
            // (llvmpipe) it is one invocation storing the whole tile and cost up to 10x on the
            // one-value formats (`gguf-dequant bench`).
            compilation_options: wgpu::PipelineCompilationOptions {
                zero_initialize_workgroup_memory: false,
                ..Default::default()
            },
            cache: None,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WGSL's bindings and element sizes are the constants the layout and bind groups use.
    #[test]
    fn wgsl_bindings_match_the_constants() {
        for &f in crate::formats::WITH_SHADER {
            for dtype in DType::ALL {
                let src = shaders::source(f, dtype).unwrap();
                let module = naga::front::wgsl::parse_str(src).unwrap();
                let mut layouter = naga::proc::Layouter::default();
                layouter.update(module.to_ctx()).unwrap();
                let mut seen = Vec::new();
                for (_, var) in module.global_variables.iter() {
                    let (Some(name), Some(b)) = (&var.name, &var.binding) else {
                        continue;
                    };
                    assert_eq!(b.group, 0, "{f} {dtype}: {name}");
                    let (want, size) = match name.as_str() {
                        "src" => (binding::SRC, SRC_ALIGN),
                        "dst" => (binding::DST, DST_ALIGN),
                        "params" => (binding::PARAMS, PARAMS_BYTES),
                        "grids" => (binding::GRIDS, SRC_ALIGN),
                        other => panic!("{f} {dtype}: unexpected binding {other}"),
                    };
                    assert_eq!(b.binding, want, "{f} {dtype}: {name}");
                    let ty = &module.types[var.ty];
                    let elem = match ty.inner {
                        naga::TypeInner::Array { stride, .. } => stride as u64,
                        _ => layouter[var.ty].size as u64,
                    };
                    assert_eq!(elem, size, "{f} {dtype}: element size of {name}");
                    seen.push(name.clone());
                }
                seen.sort();
                let mut want = vec!["dst", "params", "src"];
                if f.binds_grids() {
                    want.push("grids");
                }
                want.sort();
                assert_eq!(seen, want, "{f} {dtype}");
            }
        }
    }
}

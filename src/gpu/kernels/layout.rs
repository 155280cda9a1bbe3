//! The kernels' shared state on one device: explicit bind-group layouts (group 0: the storage
//! buffers each family numbers ([`super::StorageBinding`]); group 1: the `Params` uniform with a dynamic offset), the pipelines
//! compiled so far, and engines' own kernels ([`Program`]) on the same layouts' terms.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::family::matvec::QUANTIZE_BINDINGS;
use super::params::MAX_PARAMS_BYTES;
use super::{
    binding, kernel_source, quantize_source, KernelKey, MappingKey, Op, Plan, StorageBinding,
};
use crate::gpu::device::DeviceState;
use crate::gpu::pipelines::{compile, storage, PipelineCache};
use crate::gpu::{scoped, GpuError};
use crate::Result;

/// A group-0 binding of a [`Program`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BindingKind {
    /// `var<storage, read>`, at least `min_bytes` bound.
    Storage {
        /// Bytes a binding must have at least (the element size of its array).
        min_bytes: u64,
    },
    /// `var<storage, read_write>`, at least `min_bytes` bound.
    StorageReadWrite {
        /// Bytes a binding must have at least.
        min_bytes: u64,
    },
}

impl BindingKind {
    fn entry(self, binding: u32) -> wgpu::BindGroupLayoutEntry {
        let (read_only, min) = match self {
            BindingKind::Storage { min_bytes } => (true, min_bytes),
            BindingKind::StorageReadWrite { min_bytes } => (false, min_bytes),
        };
        storage(binding, read_only, min.max(4))
    }
}

impl From<StorageBinding> for BindingKind {
    fn from(b: StorageBinding) -> BindingKind {
        let min_bytes = b.element_bytes;
        if b.read_write {
            BindingKind::StorageReadWrite { min_bytes }
        } else {
            BindingKind::Storage { min_bytes }
        }
    }
}

/// A group-0 layout and the pipeline layout over it and the params group.
pub(crate) struct Layout {
    /// Unique among the layouts of one [`KernelSet`] (the bind-group cache's key).
    pub(crate) id: u64,
    pub(crate) group: wgpu::BindGroupLayout,
    pub(crate) pipeline: wgpu::PipelineLayout,
    /// The bindings, in order.
    pub(crate) bindings: Vec<(u32, BindingKind)>,
}

/// Objects the kernel layer created on its device, by every recorder together.
#[derive(Debug, Default)]
pub(crate) struct Created {
    pub(crate) layouts: AtomicU64,
    pub(crate) pipelines: AtomicU64,
    pub(crate) bind_groups: AtomicU64,
    pub(crate) buffers: AtomicU64,
}

impl Created {
    /// Every object counted.
    pub(crate) fn total(&self) -> u64 {
        [
            &self.layouts,
            &self.pipelines,
            &self.bind_groups,
            &self.buffers,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }
}

/// The kernels' state on one device, shared by the engine and every [`super::Recorder`].
pub(crate) struct KernelSet {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    /// The i-quant grids ([`crate::gpu::tables::words`]).
    pub(crate) tables: wgpu::Buffer,
    state: Option<Arc<DeviceState>>,
    pub(crate) plan: Plan,
    /// The params group's layout (binding [`binding::PARAMS`], dynamic offset).
    pub(crate) params_layout: wgpu::BindGroupLayout,
    layouts: Mutex<HashMap<(Op, u32), Arc<Layout>>>,
    /// The policy's per-call matvec mappings (the tuner's choices), by format, K, N and columns;
    /// a call not listed takes the plan's default ([`KernelSet::mapping`]).
    mappings: std::sync::RwLock<HashMap<MappingKey, super::Mapping>>,
    pipelines: PipelineCache<KernelKey>,
    /// The integer path's x quantiser, compiled on first use.
    quantizer: Mutex<Option<(Arc<wgpu::ComputePipeline>, Arc<Layout>)>>,
    next_id: AtomicU64,
    pub(crate) created: Created,
}

impl KernelSet {
    pub(crate) fn new(
        device: wgpu::Device,
        queue: wgpu::Queue,
        tables: wgpu::Buffer,
        state: Option<Arc<DeviceState>>,
        plan: Plan,
    ) -> Result<KernelSet, GpuError> {
        let params_layout = scoped(&device, "creating the kernels' params layout", || {
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("gguf-dequant kernel params"),
                entries: &[wgpu::BindGroupLayoutEntry {
                    binding: binding::PARAMS,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: true,
                        min_binding_size: wgpu::BufferSize::new(MAX_PARAMS_BYTES as u64),
                    },
                    count: None,
                }],
            })
        })?;
        Ok(KernelSet {
            device,
            queue,
            tables,
            state,
            plan,
            params_layout,
            layouts: Mutex::new(HashMap::new()),
            mappings: std::sync::RwLock::new(HashMap::new()),
            pipelines: PipelineCache::default(),
            quantizer: Mutex::new(None),
            next_id: AtomicU64::new(0),
            // The params layout above.
            created: Created {
                layouts: AtomicU64::new(1),
                ..Created::default()
            },
        })
    }

    /// The matvec mapping of a call on a weight of `format` with `k` values per row and `n` rows,
    /// `columns` columns: the tuner's choice where it made one, else the plan's default.
    pub(crate) fn mapping(&self, key: MappingKey) -> super::Mapping {
        let chosen = self.mappings.read().unwrap_or_else(|e| e.into_inner());
        chosen
            .get(&key)
            .copied()
            .unwrap_or(self.plan.matvec.mapping)
    }

    /// Sets (`Some`) or clears the mapping of calls with `key`.
    pub(crate) fn set_mapping(&self, key: MappingKey, mapping: Option<super::Mapping>) {
        let mut chosen = self.mappings.write().unwrap_or_else(|e| e.into_inner());
        match mapping {
            Some(m) => chosen.insert(key, m),
            None => chosen.remove(&key),
        };
    }

    /// A device loss or an uncaught error recorded by the engine's callbacks.
    pub(crate) fn check(&self) -> Result<(), GpuError> {
        self.state.as_ref().map_or(Ok(()), |s| s.check())
    }

    /// A new layout over `bindings` (group 0) and the params group.
    fn make_layout(&self, label: &str, bindings: Vec<(u32, BindingKind)>) -> Result<Layout> {
        let entries: Vec<_> = bindings.iter().map(|&(b, k)| k.entry(b)).collect();
        let (group, pipeline) = scoped(
            &self.device,
            &format!("creating the layout of {label}"),
            || {
                let group =
                    self.device
                        .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                            label: Some(label),
                            entries: &entries,
                        });
                let pipeline =
                    self.device
                        .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                            label: Some(label),
                            bind_group_layouts: &[Some(&group), Some(&self.params_layout)],
                            immediate_size: 0,
                        });
                (group, pipeline)
            },
        )?;
        self.created.layouts.fetch_add(2, Ordering::Relaxed);
        Ok(Layout {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            group,
            pipeline,
            bindings,
        })
    }

    /// The layout of `key`'s bindings, made on first use.
    pub(crate) fn layout(&self, key: &KernelKey) -> Result<Arc<Layout>> {
        let mask = key.bindings().fold(0u32, |m, b| m | 1 << b.binding);
        let lock = || self.layouts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = lock().get(&(key.op(), mask)) {
            return Ok(l.clone());
        }
        let bindings = key.bindings().map(|b| (b.binding, b.into())).collect();
        let layout = Arc::new(self.make_layout(&format!("gguf-dequant {}", key.op()), bindings)?);
        Ok(lock().entry((key.op(), mask)).or_insert(layout).clone())
    }

    /// The pipeline of `key` and its layout, compiled on first use.
    pub(crate) fn pipeline(
        &self,
        key: &KernelKey,
    ) -> Result<(Arc<wgpu::ComputePipeline>, Arc<Layout>)> {
        let layout = self.layout(key)?;
        let pipeline = self.pipelines.get_or_compile(*key, || {
            let label = format!("gguf-dequant {} on {}", key.op(), key.format);
            let p = compile(
                &self.device,
                &label,
                &kernel_source(key)?,
                Some(&layout.pipeline),
                key.entry_point(),
            )?;
            self.created.pipelines.fetch_add(1, Ordering::Relaxed);
            Ok::<_, crate::Error>(p)
        })?;
        Ok((pipeline, layout))
    }
}

impl KernelSet {
    /// The integer path's x quantiser (`quantize_q8.wgsl`) and its layout, compiled on first use.
    pub(crate) fn quantizer(&self) -> Result<(Arc<wgpu::ComputePipeline>, Arc<Layout>)> {
        let mut q = self.quantizer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = q.as_ref() {
            return Ok(p.clone());
        }
        let label = "gguf-dequant quantize_q8";
        let bindings = QUANTIZE_BINDINGS
            .iter()
            .map(|&b| (b.binding, b.into()))
            .collect();
        let layout = Arc::new(self.make_layout(label, bindings)?);
        let pipeline = compile(
            &self.device,
            label,
            &quantize_source(),
            Some(&layout.pipeline),
            "quantize_q8",
        )?;
        self.created.pipelines.fetch_add(1, Ordering::Relaxed);
        let p = (Arc::new(pipeline), layout);
        *q = Some(p.clone());
        Ok(p)
    }
}

/// An engine's own kernel (a norm, a softmax, RoPE) compiled on the terms of ours, so that
/// [`super::Recorder::dispatch`] records it beside them with the same uniform buffer and cached
/// bind groups: its WGSL declares its storage buffers in group 0 as `bindings` says and its
/// uniform parameters (at most [`MAX_PARAMS_BYTES`]) as
/// `@group(1) @binding(0) var<uniform> params: P;`.
pub struct Program {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: Layout,
    /// The device's kernel set it was made for.
    pub(crate) owner: Arc<KernelSet>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("bindings", &self.layout.bindings)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Compiles `wgsl`'s `entry` point (inside error scopes) with an explicit layout:
    /// `bindings` in group 0 (binding number, kind), the params uniform in group 1.
    pub(crate) fn new(
        set: &Arc<KernelSet>,
        label: &str,
        wgsl: &str,
        entry: &str,
        bindings: &[(u32, BindingKind)],
    ) -> Result<Program> {
        let mut sorted = bindings.to_vec();
        sorted.sort_by_key(|b| b.0);
        if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(
                GpuError::InvalidJob(format!("{label}: a binding number appears twice")).into(),
            );
        }
        let layout = set.make_layout(label, sorted)?;
        let pipeline = compile(&set.device, label, wgsl, Some(&layout.pipeline), entry)?;
        set.created.pipelines.fetch_add(1, Ordering::Relaxed);
        Ok(Program {
            pipeline,
            layout,
            owner: set.clone(),
        })
    }

    /// Its group-0 bindings, in binding order.
    pub fn bindings(&self) -> &[(u32, BindingKind)] {
        &self.layout.bindings
    }
}

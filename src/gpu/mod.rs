//! The GPU engine: raw GGUF blocks uploaded untouched into wgpu storage buffers and dequantised by
//! one WGSL compute shader per format, bit-exact with the CPU codecs.
//!
//! ```no_run
//! use gguf_dequant::gpu::{Backend, GpuEngine};
//! use gguf_dequant::{DType, Format};
//! # fn main() -> gguf_dequant::Result<()> {
//! let engine = GpuEngine::new(Backend::Auto)?; // or Backend::Vulkan, Gl, Metal, Dx12
//! let raw = vec![0u8; 18 * 4]; // four Q4_0 blocks, e.g. `file.tensor_data(info)`
//! if GpuEngine::supports(Format::Q4_0) {
//!     let f32_le_bytes = engine.dequant(Format::Q4_0, &raw, DType::F32)?;
//!     assert_eq!(f32_le_bytes.len(), 4 * 32 * 4);
//! }
//! # Ok(()) }
//! ```
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
//!   bound in windows (see [`upload`]); [`GpuEngine::dequant`] also submits at most
//!   [`EngineOptions::max_chunk_bytes`] of output at a time.

mod error;
pub mod pipelines;
pub(crate) mod readback;
pub mod shaders;
pub mod tables;
pub mod timing;
pub mod upload;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use error::GpuError;
pub use pipelines::{PipelineKey, Variant};
pub use upload::{plan_windows, WindowPlan};

pub use crate::Backend;
use crate::{DType, Error, Format, Result};

/// Tuning and test knobs of a [`GpuEngine`].
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Bind at most this many bytes per storage binding (capped by the device's
    /// `max_storage_buffer_binding_size`). Tests set it small to force windowing.
    pub max_binding_size: Option<u64>,
    /// Fold the dispatch grid to 2-D above this many workgroups per dimension (capped by the
    /// device's `max_compute_workgroups_per_dimension`, 65 535). Tests set it small.
    pub max_workgroups_per_dim: Option<u32>,
    /// Output bytes [`GpuEngine::dequant`] produces per submission (default 64 MiB); bounds the
    /// GPU memory one call holds.
    pub max_chunk_bytes: u64,
    /// How long to wait for one submission (default 60 s).
    pub timeout: Duration,
    /// Install the engine's uncaptured-error handler and device-lost callback (default `true`).
    /// They replace any the device had: set `false` in [`GpuEngine::from_device`] to keep yours.
    pub install_handlers: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_binding_size: None,
            max_workgroups_per_dim: None,
            max_chunk_bytes: 64 << 20,
            timeout: Duration::from_secs(60),
            install_handlers: true,
        }
    }
}

/// Errors recorded by the device callbacks, checked after every call.
#[derive(Default)]
struct DeviceState {
    lost: Mutex<Option<String>>,
    uncaptured: Mutex<Option<String>>,
}

/// One caller-owned dequantisation for [`GpuEngine::record`].
#[derive(Clone, Copy, Debug)]
pub struct DequantJob<'a> {
    /// The block format of `src`.
    pub format: Format,
    /// The output element type.
    pub dtype: DType,
    /// Raw blocks (usage `STORAGE`). The bytes at `src_offset ..` are `n_blocks` blocks, and the
    /// buffer extends at least to the next multiple of 4 bytes after them.
    pub src: &'a wgpu::Buffer,
    /// A multiple of [`GpuEngine::offset_alignment`].
    pub src_offset: u64,
    /// Blocks to decode.
    pub n_blocks: u64,
    /// Output (usage `STORAGE`): `n_blocks * elems * dtype.size()` bytes at `dst_offset`, and the
    /// buffer extends at least to the next multiple of 16 bytes after them; the padding bytes
    /// are left unchanged.
    pub dst: &'a wgpu::Buffer,
    /// A multiple of [`GpuEngine::offset_alignment`] and of 16.
    pub dst_offset: u64,
}

/// A GPU device set up to dequantise GGUF tensors. `Send + Sync`; calls may come from any thread.
pub struct GpuEngine {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    options: EngineOptions,
    pipelines: pipelines::Pipelines,
    /// The lookup tables of [`tables`], bound at binding 3 of every dispatch.
    tables: wgpu::Buffer,
    state: Arc<DeviceState>,
    /// The backend the engine picked its adapter from; `None` for a caller's device.
    backend: Option<Backend>,
}

impl fmt::Debug for GpuEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuEngine")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish_non_exhaustive()
    }
}

/// Runs `f` inside out-of-memory, validation and internal error scopes and turns what they caught
/// into a [`GpuError`] naming `what`.
pub(crate) fn scoped<T>(
    device: &wgpu::Device,
    what: &str,
    f: impl FnOnce() -> T,
) -> Result<T, GpuError> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let out = f();
    let e_internal = pollster::block_on(internal.pop());
    let e_validation = pollster::block_on(validation.pop());
    let e_oom = pollster::block_on(oom.pop());
    match e_oom.or(e_validation).or(e_internal) {
        Some(e) => Err(GpuError::from_wgpu(what, e)),
        None => Ok(out),
    }
}

fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    desc.flags = wgpu::InstanceFlags::from_build_config().with_env();
    desc.backend_options = wgpu::BackendOptions::from_env_or_default();
    wgpu::Instance::new(desc)
}

/// Adapters that can run compute shaders, best first.
fn adapters(backends: wgpu::Backends) -> (Vec<wgpu::Adapter>, Vec<String>) {
    let all = pollster::block_on(instance(backends).enumerate_adapters(backends));
    let seen = all.iter().map(|a| describe(&a.get_info())).collect();
    let mut usable: Vec<wgpu::Adapter> = all
        .into_iter()
        .filter(|a| {
            a.get_downlevel_capabilities()
                .flags
                .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
        })
        .collect();
    usable.sort_by_key(|a| {
        let info = a.get_info();
        let kind = match info.device_type {
            wgpu::DeviceType::DiscreteGpu => 0,
            wgpu::DeviceType::IntegratedGpu => 1,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Cpu => 3,
            wgpu::DeviceType::Other => 4,
        };
        (kind, info.backend == wgpu::Backend::Gl)
    });
    (usable, seen)
}

fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

/// An adapter as wgpu reports it, with the limits that matter for dequantisation.
#[derive(Clone, Debug)]
pub struct AdapterDetails {
    /// Name, vendor, backend, device type, driver.
    pub info: wgpu::AdapterInfo,
    /// The adapter's own limits (what a device created by [`GpuEngine::new`] gets).
    pub limits: wgpu::Limits,
    /// Whether it runs compute shaders (GL adapters below GLES 3.1 do not).
    pub compute: bool,
}

/// Every adapter wgpu sees on any backend, usable for compute or not.
pub fn list_adapters() -> Vec<AdapterDetails> {
    let backends = Backend::Auto.wgpu_backends();
    pollster::block_on(instance(backends).enumerate_adapters(backends))
        .iter()
        .map(|a| AdapterDetails {
            info: a.get_info(),
            limits: a.limits(),
            compute: a
                .get_downlevel_capabilities()
                .flags
                .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS),
        })
        .collect()
}

impl GpuEngine {
    /// Picks the best adapter of `backend` and creates a device with the adapter's own limits.
    pub fn new(backend: Backend) -> Result<GpuEngine> {
        GpuEngine::with_options(backend, EngineOptions::default())
    }

    /// [`GpuEngine::new`] with options.
    pub fn with_options(backend: Backend, options: EngineOptions) -> Result<GpuEngine> {
        let (usable, seen) = adapters(backend.wgpu_backends());
        let Some(adapter) = usable.into_iter().next() else {
            let seen = if seen.is_empty() {
                "none".to_string()
            } else {
                seen.join(", ")
            };
            return Err(GpuError::NoAdapter {
                backend: backend.to_string(),
                seen,
            }
            .into());
        };
        let info = adapter.get_info();
        let desc = wgpu::DeviceDescriptor {
            label: Some("gguf-dequant"),
            required_features: wgpu::Features::empty(),
            required_limits: adapter.limits(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc)).map_err(|e| {
            GpuError::RequestDevice {
                adapter: describe(&info),
                reason: e.to_string(),
            }
        })?;
        let mut engine = GpuEngine::from_device(device, queue, options)?;
        engine.backend = Some(backend);
        Ok(engine)
    }

    /// Whether the device is lost (driver reset, removal, `destroy`), as the device-lost callback
    /// recorded it (needs [`EngineOptions::install_handlers`]). Every later call of a lost engine
    /// fails with [`GpuError::DeviceLost`]; [`GpuEngine::recreate`] gives a working one.
    pub fn is_lost(&self) -> bool {
        let _ = self.device.poll(wgpu::PollType::Poll);
        self.state
            .lost
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// A new engine with the same backend and options on a fresh device: how to recover from
    /// [`GpuError::DeviceLost`]. Buffers of the old device are not carried over. An engine made
    /// by [`GpuEngine::from_device`] cannot be recreated (the device is the caller's: make a
    /// new one and call `from_device` again); that is [`GpuError::DeviceLost`].
    pub fn recreate(&self) -> Result<GpuEngine> {
        match self.backend {
            Some(b) => GpuEngine::with_options(b, self.options.clone()),
            None => Err(GpuError::DeviceLost(
                "the engine runs on a caller's device: create a new device and call GpuEngine::from_device".into(),
            )
            .into()),
        }
    }

    /// An engine on a caller's device and queue (e.g. to share buffers with a renderer or an
    /// inference engine). The engine uses the device's limits as they are.
    pub fn from_device(
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: EngineOptions,
    ) -> Result<GpuEngine> {
        let state = Arc::new(DeviceState::default());
        if options.install_handlers {
            let s = state.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                let mut slot = s.uncaptured.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert_with(|| e.to_string());
            }));
            let s = state.clone();
            device.set_device_lost_callback(move |reason, message| {
                let mut slot = s.lost.lock().unwrap_or_else(|p| p.into_inner());
                *slot = Some(format!("{reason:?}: {message}"));
            });
        }
        let pipelines = pipelines::Pipelines::new(&device)?;
        // Not `create_buffer_init`: it panics when the buffer is invalid (a device whose
        // `max_buffer_size` is below the tables' size, or a lost one).
        let tables = scoped(&device, "uploading the lookup tables", || {
            upload::upload(
                &device,
                "gguf-dequant tables",
                bytemuck::cast_slice(&tables::words()),
            )
        })??;
        Ok(GpuEngine {
            info: device.adapter_info(),
            limits: device.limits(),
            device,
            queue,
            options,
            pipelines,
            tables,
            state,
            backend: None,
        })
    }

    /// The adapter the device belongs to (name, backend, driver), as wgpu reports it.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// The device's limits.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Whether `format` has a GPU shader (for every output dtype). Formats without one (F64,
    /// I8..I64) are decoded on the CPU.
    pub const fn supports(format: Format) -> bool {
        shaders::source(format, DType::F32).is_some()
    }

    /// The storage-binding size in use: the device limit, or the smaller forced limit.
    pub fn max_binding_size(&self) -> u64 {
        let device = self.limits.max_storage_buffer_binding_size;
        self.options
            .max_binding_size
            .map_or(device, |m| m.min(device))
    }

    /// The alignment every storage-binding offset keeps (`min_storage_buffer_offset_alignment`).
    pub fn offset_alignment(&self) -> u64 {
        self.limits.min_storage_buffer_offset_alignment as u64
    }

    /// The number of binding windows [`GpuEngine::record`] splits `n_blocks` blocks of `format`
    /// into when decoding to `dtype` (1 when the tensor fits one binding).
    pub fn window_count(&self, format: Format, dtype: DType, n_blocks: u64) -> Result<u64> {
        let plan = upload::plan(
            format,
            dtype.size() as u64,
            self.max_binding_size(),
            self.offset_alignment(),
        )?;
        Ok(plan.count(n_blocks))
    }

    /// Compiles (once) the pipeline that decodes `format` to `dtype`, so that later calls do not
    /// pay for it and shader problems surface early.
    pub fn prepare(&self, format: Format, dtype: DType) -> Result<()> {
        self.pipelines
            .get(&self.device, (format, dtype, Variant::Baseline))?;
        Ok(self.check()?)
    }

    /// Reports a device loss or an error no scope caught, as recorded by the engine's callbacks
    /// (when [`EngineOptions::install_handlers`] is set): [`GpuError::DeviceLost`] or
    /// [`GpuError::Uncaptured`] (which this call clears). `Ok` when neither happened.
    pub fn check_device(&self) -> Result<()> {
        Ok(self.check()?)
    }

    fn check(&self) -> Result<(), GpuError> {
        if let Some(m) = self
            .state
            .lost
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Err(GpuError::DeviceLost(m));
        }
        if let Some(m) = self
            .state
            .uncaptured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            return Err(GpuError::Uncaptured(m));
        }
        Ok(())
    }

    /// Records the commands that decode `job` into `encoder`, binding the buffers in windows of at
    /// most [`GpuEngine::max_binding_size`] bytes. Nothing is submitted.
    pub fn record(&self, encoder: &mut wgpu::CommandEncoder, job: &DequantJob<'_>) -> Result<()> {
        let DequantJob {
            format,
            dtype,
            src,
            src_offset,
            n_blocks,
            dst,
            dst_offset,
        } = *job;
        self.check()?;
        let pipeline = self
            .pipelines
            .get(&self.device, (format, dtype, Variant::Baseline))?;
        if n_blocks == 0 {
            return Ok(());
        }
        let out_size = dtype.size() as u64;
        let align = self.offset_alignment();
        let invalid = |m: String| -> Error { GpuError::InvalidJob(m).into() };
        let (src_len, dst_len) = upload::checked_padded(format, n_blocks, out_size)
            .ok_or_else(|| invalid(format!("{n_blocks} blocks of {format} overflow 64 bits")))?;
        if src_offset % align != 0 || dst_offset % align.max(upload::DST_ALIGN) != 0 {
            return Err(invalid(format!(
                "offsets {src_offset} and {dst_offset} must be multiples of {align} (and 16 for the output)"
            )));
        }
        if src_offset
            .checked_add(src_len)
            .is_none_or(|end| end > src.size())
        {
            return Err(invalid(format!(
                "source buffer of {} bytes is smaller than offset {src_offset} + {src_len}",
                src.size()
            )));
        }
        if dst_offset
            .checked_add(dst_len)
            .is_none_or(|end| end > dst.size())
        {
            return Err(invalid(format!(
                "output buffer of {} bytes is smaller than offset {dst_offset} + {dst_len}",
                dst.size()
            )));
        }
        if !src.usage().contains(wgpu::BufferUsages::STORAGE)
            || !dst.usage().contains(wgpu::BufferUsages::STORAGE)
        {
            return Err(invalid("both buffers need usage STORAGE".to_string()));
        }
        let plan = upload::plan(format, out_size, self.max_binding_size(), align)?;
        let device_dim = self.limits.max_compute_workgroups_per_dimension;
        let max_dim = self
            .options
            .max_workgroups_per_dim
            .map_or(device_dim, |m| m.clamp(1, device_dim)) as u64;
        let bytes = format.block_bytes() as u64;
        let elems = format.block_elems() as u64;
        scoped(
            &self.device,
            &format!("recording {format} to {dtype}"),
            || {
                for (first, count) in plan.windows(n_blocks) {
                    let n_out = count * elems;
                    let groups = n_out.div_ceil(shaders::VALS_PER_WORKGROUP);
                    let params: [u32; 4] = [n_out as u32, groups as u32, 0, 0];
                    // Not `create_buffer_init`, which panics on a lost device.
                    let uniform = upload::upload_as(
                        &self.device,
                        "gguf-dequant params",
                        bytemuck::cast_slice(&params),
                        wgpu::BufferUsages::UNIFORM,
                    )?;
                    let (s_len, d_len) = upload::padded(format, count, out_size);
                    let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some("gguf-dequant window"),
                        layout: &self.pipelines.bind_group_layout,
                        entries: &[
                            wgpu::BindGroupEntry {
                                binding: 0,
                                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                    buffer: src,
                                    offset: src_offset + first * bytes,
                                    size: wgpu::BufferSize::new(s_len),
                                }),
                            },
                            wgpu::BindGroupEntry {
                                binding: 1,
                                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                    buffer: dst,
                                    offset: dst_offset + first * elems * out_size,
                                    size: wgpu::BufferSize::new(d_len),
                                }),
                            },
                            wgpu::BindGroupEntry {
                                binding: 2,
                                resource: uniform.as_entire_binding(),
                            },
                            wgpu::BindGroupEntry {
                                binding: 3,
                                resource: self.tables.as_entire_binding(),
                            },
                        ],
                    });
                    let (x, y) = upload::grid(groups, max_dim);
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("gguf-dequant"),
                        timestamp_writes: None,
                    });
                    pass.set_pipeline(&pipeline);
                    pass.set_bind_group(0, &bind, &[]);
                    pass.dispatch_workgroups(x, y, 1);
                }
                Ok::<_, GpuError>(())
            },
        )??;
        self.check()?;
        Ok(())
    }

    /// Decodes `src` (whole blocks of `format`, e.g. `file.tensor_data(info)`, uploaded as they are)
    /// to little-endian `dtype` bytes: f32, f16 or bf16.
    pub fn dequant(&self, format: Format, src: &[u8], dtype: DType) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let n = crate::cpu::n_values(format, src.len())?;
        let len = n * dtype.size();
        out.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
            bytes: len,
            what: format!("{format} GPU output"),
        })?;
        out.resize(len, 0);
        self.dequant_into(format, src, dtype, &mut out)?;
        Ok(out)
    }

    /// [`GpuEngine::dequant`] into a caller's slice of exactly the output size.
    pub fn dequant_into(
        &self,
        format: Format,
        src: &[u8],
        dtype: DType,
        out: &mut [u8],
    ) -> Result<()> {
        let n = crate::cpu::n_values(format, src.len())?;
        if n.checked_mul(dtype.size()) != Some(out.len()) {
            return Err(Error::DestinationSize {
                format,
                expected: n,
                got: out.len() / dtype.size(),
            });
        }
        self.check()?;
        self.pipelines
            .get(&self.device, (format, dtype, Variant::Baseline))?;
        let bytes = format.block_bytes() as u64;
        let out_block = format.block_elems() as u64 * dtype.size() as u64;
        let n_blocks = src.len() as u64 / bytes;
        let max_buffer = self.limits.max_buffer_size;
        // Requests the device cannot take fail here, before any buffer is created.
        upload::plan(
            format,
            dtype.size() as u64,
            self.max_binding_size(),
            self.offset_alignment(),
        )?;
        let (one_src, one_dst) = upload::padded(format, 1, dtype.size() as u64);
        if n_blocks > 0 && one_src.max(one_dst) > max_buffer {
            return Err(GpuError::TooLarge {
                what: format!("one {format} block to {dtype}"),
                bytes: one_src.max(one_dst),
                limit: max_buffer,
            }
            .into());
        }
        let chunk_blocks = (self.options.max_chunk_bytes.min(max_buffer & !15) / out_block)
            .min((max_buffer & !3) / bytes)
            .max(1);
        let mut done = 0u64;
        while done < n_blocks {
            let count = chunk_blocks.min(n_blocks - done);
            let s = &src[(done * bytes) as usize..((done + count) * bytes) as usize];
            let o = &mut out[(done * out_block) as usize..((done + count) * out_block) as usize];
            self.run_chunk(format, dtype, s, count, o)?;
            done += count;
        }
        Ok(())
    }

    fn run_chunk(
        &self,
        format: Format,
        dtype: DType,
        src: &[u8],
        n_blocks: u64,
        out: &mut [u8],
    ) -> Result<()> {
        let (_, dst_len) = upload::padded(format, n_blocks, dtype.size() as u64);
        let what = format!("allocating buffers for {n_blocks} {format} blocks");
        let (src_buf, dst_buf, staging) = scoped(&self.device, &what, || {
            let src_buf = upload::upload(&self.device, "gguf-dequant source", src)?;
            let dst_buf = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gguf-dequant output"),
                size: dst_len,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gguf-dequant readback"),
                size: dst_len,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            Ok::<_, GpuError>((src_buf, dst_buf, staging))
        })??;
        self.check()?;
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gguf-dequant"),
            });
        self.record(
            &mut encoder,
            &DequantJob {
                format,
                dtype,
                src: &src_buf,
                src_offset: 0,
                n_blocks,
                dst: &dst_buf,
                dst_offset: 0,
            },
        )?;
        let index = scoped(&self.device, "submitting", || {
            encoder.copy_buffer_to_buffer(&dst_buf, 0, &staging, 0, dst_len);
            self.queue.submit([encoder.finish()])
        })?;
        readback::read_into(&self.device, &staging, index, self.options.timeout, out)?;
        self.check()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<GpuEngine>();
    }

    #[test]
    fn supports_every_block_format_but_not_the_plain_integers() {
        let n = Format::ALL
            .iter()
            .filter(|&&f| GpuEngine::supports(f))
            .count();
        assert_eq!(n, 31, "{n}");
        use Format::*;
        for f in [
            IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_XS, IQ4_NL, Q4_0, Q4_K, Q8_K,
            TQ1_0,
        ] {
            assert!(GpuEngine::supports(f), "{f}");
        }
        assert!(!GpuEngine::supports(F64) && !GpuEngine::supports(I8));
    }
}

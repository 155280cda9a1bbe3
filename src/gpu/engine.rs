//! [`GpuEngine`]: a device, its queue and limits, the dequantiser's pipelines and the kernels'
//! shared state.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::pipelines::{self, binding, Variant};
use super::{buffers, device, kernels, scoped, shaders, tables, windows, GpuError};
use crate::{Backend, DType, Error, Format, Result};

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
    /// For [`GpuEngine::from_device`]: install the engine's uncaptured-error handler and
    /// device-lost callback on the caller's device, replacing the caller's own (default `false`:
    /// the caller's handlers are left alone, and [`GpuEngine::is_lost`] then only knows what
    /// the caller's device reports through errors). Devices the engine creates itself always
    /// get them.
    pub install_handlers: bool,
    /// What the matvec and matvec_id kernels run on ([`kernels::MatVecOptions`]: the default
    /// mapping, threads per row, subgroups, unrolling); the device makes it the engine's
    /// [`GpuEngine::matvec_policy`]. Tests set it to cover every variant.
    pub matvec: kernels::MatVecOptions,
    /// How the products sum ([`kernels::Precision`], default `exact`): `factored` takes each
    /// part's scales out of its sums (as llama.cpp: `d·Σq·x + m·Σx`; bound of
    /// [`crate::ops::mul_mat_factored`]); `int8` is the integer path (x quantised once per call
    /// to int8 codes with a scale per 32 values, as ggml's Q8_1, each weight part's codes dotted
    /// with them through `dot4I8Packed`, as llama.cpp's `mmvq`; bound of
    /// [`crate::ops::mul_mat_int_dot`]); `mixed16` is reserved. Both apply to `matvec` (and
    /// `matmul` on CPU adapters: its matvecs) of the formats of [`kernels::INT_DOT_FORMATS`];
    /// every other call sums `exact`, never in a looser mode ([`GpuEngine::precision_for`]).
    pub precision: kernels::Precision,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_binding_size: None,
            max_workgroups_per_dim: None,
            max_chunk_bytes: 64 << 20,
            timeout: Duration::from_secs(60),
            install_handlers: false,
            matvec: kernels::MatVecOptions::default(),
            precision: kernels::Precision::Exact,
        }
    }
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
///
/// ```no_run
/// use gguf_dequant::gpu::{Backend, GpuEngine};
/// use gguf_dequant::{DType, Format};
/// # fn main() -> gguf_dequant::Result<()> {
/// let engine = GpuEngine::new(Backend::Auto)?; // or Backend::Vulkan, Gl, Metal, Dx12
/// let raw = vec![0u8; 18 * 4]; // four Q4_0 blocks, e.g. `file.tensor_data(info)`
/// if Format::Q4_0.has_shader() {
///     let f32_le_bytes = engine.dequant(Format::Q4_0, &raw, DType::F32)?;
///     assert_eq!(f32_le_bytes.len(), 4 * 32 * 4);
/// }
/// # Ok(()) }
/// ```
pub struct GpuEngine {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    pub(crate) options: EngineOptions,
    pipelines: pipelines::Pipelines,
    /// The inference kernels' layouts, pipelines and plan, shared with every recorder.
    pub(crate) kernels: Arc<kernels::KernelSet>,
    /// The lookup tables of [`tables`], bound at binding 3 of every dispatch.
    tables: wgpu::Buffer,
    /// What the device callbacks recorded; `None` on a caller's device without them.
    state: Option<Arc<device::DeviceState>>,
    /// The adapter the engine made its device on; `None` for a caller's device.
    adapter: Option<wgpu::Adapter>,
}

impl fmt::Debug for GpuEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuEngine")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish_non_exhaustive()
    }
}

impl GpuEngine {
    /// Picks the best adapter of `backend` and creates a device with the adapter's own limits.
    pub fn new(backend: Backend) -> Result<GpuEngine> {
        GpuEngine::with_options(backend, EngineOptions::default())
    }

    /// [`GpuEngine::new`] with options.
    pub fn with_options(backend: Backend, options: EngineOptions) -> Result<GpuEngine> {
        let best = device::compute_adapters(backend)?.swap_remove(0);
        GpuEngine::from_adapter(&best, options)
    }

    /// An engine on a new device of `adapter` (one of [`super::compute_adapters`]), with the adapter's
    /// own limits and, where the adapter has them, timestamp queries (for
    /// [`super::timing::GpuTimer`]). The engine installs its error handler and device-lost callback.
    pub fn from_adapter(adapter: &wgpu::Adapter, options: EngineOptions) -> Result<GpuEngine> {
        let (device, queue) = device::request_device(adapter)?;
        let state = device::DeviceState::install(&device);
        let mut engine = GpuEngine::build(device, queue, options, Some(state))?;
        engine.adapter = Some(adapter.clone());
        Ok(engine)
    }

    /// Whether the device is lost (driver reset, removal, `destroy`), as the device-lost callback
    /// recorded it (on a caller's device: only with [`EngineOptions::install_handlers`]). Every later call of a lost engine
    /// fails with [`GpuError::DeviceLost`]; [`GpuEngine::recreate`] gives a working one.
    pub fn is_lost(&self) -> bool {
        self.poll();
        self.state.as_ref().is_some_and(|s| s.is_lost())
    }

    /// A new engine with the same options on a fresh device of the same adapter: how to recover from
    /// [`GpuError::DeviceLost`]. Buffers of the old device are not carried over. An engine made
    /// by [`GpuEngine::from_device`] cannot be recreated (the device is the caller's: make a
    /// new one and call `from_device` again); that is [`GpuError::DeviceLost`].
    pub fn recreate(&self) -> Result<GpuEngine> {
        match &self.adapter {
            Some(a) => GpuEngine::from_adapter(a, self.options.clone()),
            None => Err(GpuError::DeviceLost(
                "the engine runs on a caller's device: create a new device and call GpuEngine::from_device".into(),
            )
            .into()),
        }
    }

    /// An engine on a caller's device and queue (e.g. to share buffers with a renderer or an
    /// inference engine). The engine uses the device's limits as they are, and leaves the
    /// device's error and device-lost handlers alone unless [`EngineOptions::install_handlers`]
    /// asks it to install its own.
    pub fn from_device(
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: EngineOptions,
    ) -> Result<GpuEngine> {
        let state = options
            .install_handlers
            .then(|| device::DeviceState::install(&device));
        GpuEngine::build(device, queue, options, state)
    }

    fn build(
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: EngineOptions,
        state: Option<Arc<device::DeviceState>>,
    ) -> Result<GpuEngine> {
        let pipelines = pipelines::Pipelines::new(&device)?;
        // Not `create_buffer_init`: it panics when the buffer is invalid (a device whose
        // `max_buffer_size` is below the tables' size, or a lost one).
        let tables = buffers::upload(
            &device,
            "gguf-dequant tables",
            bytemuck::cast_slice(&tables::words()),
        )?;
        let info = device.adapter_info();
        let limits = device.limits();
        let subgroups = device
            .features()
            .contains(wgpu::Features::SUBGROUP)
            .then_some((info.subgroup_min_size, info.subgroup_max_size));
        // Probed only where the options let the kernels use it.
        let exact_f16 = options.matvec.hw_f16 != Some(false)
            && device::exact_f16(&device, &queue, options.timeout)?;
        let matvec = kernels::MatVecPolicy::new(
            &options.matvec,
            info.device_type == wgpu::DeviceType::Cpu,
            subgroups,
            limits
                .max_compute_invocations_per_workgroup
                .min(limits.max_compute_workgroup_size_x),
            exact_f16,
        )
        .map_err(GpuError::InvalidOption)?;
        let device_dim = limits.max_compute_workgroups_per_dimension;
        let plan = kernels::Plan {
            align: limits.min_storage_buffer_offset_alignment as u64,
            uniform_align: limits.min_uniform_buffer_offset_alignment as u64,
            max_binding: options
                .max_binding_size
                .map_or(limits.max_storage_buffer_binding_size, |m| {
                    m.min(limits.max_storage_buffer_binding_size)
                }),
            max_dim: options
                .max_workgroups_per_dim
                .map_or(device_dim, |m| m.clamp(1, device_dim)) as u64,
            matvec,
            precision: options.precision,
        };
        let kernels = Arc::new(kernels::KernelSet::new(
            device.clone(),
            queue.clone(),
            tables.clone(),
            state.clone(),
            plan,
        )?);
        Ok(GpuEngine {
            info,
            limits,
            device,
            queue,
            options,
            pipelines,
            kernels,
            tables,
            state,
            adapter: None,
        })
    }

    /// The adapter the device belongs to (name, backend, driver), as wgpu reports it.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// What the device offers kernels beyond WebGPU's core (the features it was created with:
    /// [`GpuEngine::new`] enables `SUBGROUP` where the adapter has it).
    pub fn capabilities(&self) -> super::Capabilities {
        super::Capabilities::of_device(&self.device)
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
        let plan = windows::plan(
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
        self.state.as_ref().map_or(Ok(()), |s| s.check())
    }

    /// Submits `encoder` (inside error scopes), then checks the device.
    pub(crate) fn submit(
        &self,
        what: &str,
        encoder: wgpu::CommandEncoder,
    ) -> Result<wgpu::SubmissionIndex, GpuError> {
        let index = buffers::submit(&self.device, &self.queue, what, encoder)?;
        self.check()?;
        Ok(index)
    }

    /// Polls the device once without blocking (map callbacks run inside polls).
    pub(crate) fn poll(&self) {
        let _ = self.device.poll(wgpu::PollType::Poll);
    }

    /// Waits (at most `timeout`) for every submission, ignoring errors: after a failure, so that a
    /// device destroyed meanwhile has run its device-lost callback (wgpu runs it once the queue
    /// is empty) before the failure is classified.
    pub(crate) fn settle(&self, timeout: Duration) {
        let _ = self.device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: Some(timeout),
        });
    }

    /// Waits for submission `index` (at most [`EngineOptions::timeout`]), then checks the device.
    pub(crate) fn wait(&self, index: wgpu::SubmissionIndex) -> Result<(), GpuError> {
        self.wait_for(index, self.options.timeout)
    }

    /// [`GpuEngine::wait`] with another timeout.
    pub(crate) fn wait_for(
        &self,
        index: wgpu::SubmissionIndex,
        timeout: Duration,
    ) -> Result<(), GpuError> {
        buffers::wait(&self.device, index, timeout)?;
        self.check()
    }

    /// Reads the first `out.len()` bytes of `staging` (a `MAP_READ` buffer the caller keeps, e.g.
    /// the target of a `copy_buffer_to_buffer` in submission `index`) once that submission is
    /// done, waiting at most [`EngineOptions::timeout`]; maps, copies and unmaps it, then checks
    /// the device. Every failure (timeout, map error, lost device) is a typed error.
    pub fn read_into(
        &self,
        staging: &wgpu::Buffer,
        index: wgpu::SubmissionIndex,
        out: &mut [u8],
    ) -> Result<(), GpuError> {
        buffers::read_into(&self.device, staging, index, self.options.timeout, out)?;
        self.check()
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
        let (src_len, dst_len) = windows::checked_padded(format, n_blocks, out_size)
            .ok_or_else(|| invalid(format!("{n_blocks} blocks of {format} overflow 64 bits")))?;
        if src_offset % align != 0 || dst_offset % align.max(windows::DST_ALIGN) != 0 {
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
        let plan = windows::plan(format, out_size, self.max_binding_size(), align)?;
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
                    let uniform = buffers::upload_as(
                        &self.device,
                        "gguf-dequant params",
                        bytemuck::cast_slice(&params),
                        wgpu::BufferUsages::UNIFORM,
                    )?;
                    let (s_len, d_len) = windows::padded(format, count, out_size);
                    let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some("gguf-dequant window"),
                        layout: &self.pipelines.bind_group_layout,
                        entries: &[
                            wgpu::BindGroupEntry {
                                binding: binding::SRC,
                                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                    buffer: src,
                                    offset: src_offset + first * bytes,
                                    size: wgpu::BufferSize::new(s_len),
                                }),
                            },
                            wgpu::BindGroupEntry {
                                binding: binding::DST,
                                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                    buffer: dst,
                                    offset: dst_offset + first * elems * out_size,
                                    size: wgpu::BufferSize::new(d_len),
                                }),
                            },
                            wgpu::BindGroupEntry {
                                binding: binding::PARAMS,
                                resource: uniform.as_entire_binding(),
                            },
                            wgpu::BindGroupEntry {
                                binding: binding::GRIDS,
                                resource: self.tables.as_entire_binding(),
                            },
                        ],
                    });
                    let (x, y) = windows::grid(groups, max_dim);
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
        windows::plan(
            format,
            dtype.size() as u64,
            self.max_binding_size(),
            self.offset_alignment(),
        )?;
        let (one_src, one_dst) = windows::padded(format, 1, dtype.size() as u64);
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
        let (_, dst_len) = windows::padded(format, n_blocks, dtype.size() as u64);
        let device = &self.device;
        let src_buf = buffers::upload(device, "gguf-dequant source", src)?;
        let (dst_buf, staging) = buffers::output_and_readback(device, "gguf-dequant", dst_len)?;
        self.check()?;
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
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
        encoder.copy_buffer_to_buffer(&dst_buf, 0, &staging, 0, dst_len);
        let index = self.submit("submitting", encoder)?;
        self.read_into(&staging, index, out)?;
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
}

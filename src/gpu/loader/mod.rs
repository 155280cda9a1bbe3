//! The GPU-resident weight loader: GGUF tensors streamed from the file into wgpu buffers,
//! kept as raw quantised blocks or dequantised to f32/f16/bf16 on the GPU, for inference engines
//! and other wgpu programs.
//!
//! ```no_run
//! use gguf_dequant::gpu::loader::{Residency, WeightLoader};
//! use gguf_dequant::{Backend, DType, GgufFile, Selection};
//! # fn main() -> gguf_dequant::Result<()> {
//! let loader = WeightLoader::new(Backend::Auto)?; // or WeightLoader::from_device(device, queue)
//! let file = GgufFile::open("model.gguf")?;
//! let model = loader.load(&file, &Selection::glob(["blk.0.*", "output_norm.weight"]), Residency::Dequantised(DType::F16))?;
//! let t = model.get("blk.0.attn_q.weight").expect("selected");
//! // Row 3 (`t.dims[0]` f16 values), bound for your own pipeline wherever its part is:
//! let row = t.dims[0];
//! let align = loader.engine().offset_alignment();
//! let b = t.bind_elements(3 * row..4 * row, align)?;
//! println!("{} {} {:?}: part {}, bytes {}+{}, first value at {:?}", t.name, t.format, t.dims,
//!     b.part, b.offset, b.size, b.skip_elements);
//! println!("{:.2} GB/s", model.report().gb_per_s());
//! # Ok(()) }
//! ```
//!
//! # What a load does
//!
//! [`WeightLoader::load`] resolves the [`Selection`], plans the load, allocates every resident
//! buffer (one per tensor, or several *parts* when a tensor is larger than the device's
//! `max_buffer_size`), then streams:
//!
//! ```text
//!   reader threads                         calling thread                     GPU
//!   mmap / pread ─► staging slot k  ──►    unmap k, encode, submit   ──►   copy k ─► dequant k
//!        ▲                                  map_async(k) ─┐                      │
//!        └──────────── slot k free again ◄────────────────┴──── when done ◄──────┘
//! ```
//!
//! * **Bounded staging.** [`LoadOptions::staging_bytes`] (default 64 MiB) split into
//!   [`LoadOptions::slots`] (default 4) mapped `MAP_WRITE` buffers. Each slot is filled with whole
//!   blocks of one or more tensors (small tensors are packed together, big ones split across
//!   slots). [`LoadOptions::readers`] threads (default 2) take the chunks in file order, each
//!   into whichever slot is free, and fill slots k+1.. while the GPU copies and dequantises slot
//!   k, so reading, upload and GPU work overlap; no tensor or file is ever copied whole on the
//!   heap, so host memory stays bounded by the staging budget whatever the model size.
//! * **Dequantisation** runs on the GPU with the engine's shaders: the raw blocks of a slot are
//!   copied into a GPU scratch slot (storage usage) and decoded from there straight into the
//!   tensor's buffer, bound in windows of at most the engine's binding size. Formats without a
//!   shader (F64 and the integer types) are decoded by the CPU codecs on the reader thread into
//!   the slot instead ([`LoadOptions::cpu_fallback`]), so every format loads and the
//!   results are bit-exact either way.
//! * **Sources.** [`Source::Mmap`] copies from the file's memory map, releasing the pages
//!   behind it; [`Source::DirectRead`] reads the file with `pread` straight into the mapped slot
//!   (one copy, and a file truncated meanwhile is an error rather than `SIGBUS`);
//!   [`Source::Direct`] reads with `O_DIRECT`, past the page cache.
//! * **Rooflines.** [`WeightLoader::measure_rooflines`] measures, in the same run, how fast the
//!   files read (page cache, disk) and how fast this adapter takes host memory through the same
//!   staging ring; [`LoadRooflines::fraction`] puts a [`LoadReport`] against the smaller.
//! * **Failure.** Every error is typed ([`crate::Error`], with [`crate::Error::hint`]); nothing
//!   panics. A failed load drops every buffer it created and registers nothing:
//!   [`WeightLoader::stats`] is back where it was.
//!
//! # Using resident tensors in your own shaders
//!
//! Dequantised tensors are plain little-endian arrays (`array<f32>`, or `array<u32>` holding two
//! f16/bf16 each) in ggml order: `dims[0]` is the row length. Raw tensors hold the GGUF blocks
//! untouched; [`crate::gpu::shaders::wgsl_decode_source`] gives the WGSL that decodes them, and
//! [`WeightLoader::record`] / [`WeightLoader::record_tensor`] record a dequantisation into your
//! own `CommandEncoder` for engines that manage their own memory.
//!
//! The loader is `Send + Sync`: share one (e.g. in an `Arc`) and load from many threads at once;
//! each load has its own staging ring.
//!
//! # Several devices
//!
//! [`MultiLoader`] places one model over several devices ([`Placement`]: whole layers per device,
//! by proportions or by budgets, the input and output tensors where asked) and loads each
//! device's share through that device's loader, all devices at once.

mod freshness;
mod multi;
mod options;
mod placement;
mod plan;
mod resident;
mod roofline;
mod stream;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use multi::{DeviceReport, MultiLoader, MultiModel, MultiReport};
use options::gb_per_s;
pub use options::{LoadOptions, LoadReport, Progress, RecordJob, Residency, Source};
pub use placement::{resident_bytes, Placement, Role, Split};
use plan::{Limits, Path, Plan};
use resident::{Allocation, Counters};
pub use resident::{ElementBinding, ResidentModel, ResidentPart, ResidentTensor, ServiceStats};
pub use roofline::{drop_page_cache, LoadRooflines, NotMeasured, RooflineOptions, Throughput};
pub use stream::READER_THREAD;

use crate::gpu::{buffers, windows, DequantJob, EngineOptions, GpuEngine, GpuError};
use crate::{Backend, DType, Error, GgufFile, Result, Selection};

/// The service: loads GGUF tensors onto one GPU device. `Send + Sync`; share it and load from
/// any number of threads at once.
#[derive(Clone, Debug)]
pub struct WeightLoader {
    engine: Arc<GpuEngine>,
    options: LoadOptions,
    counters: Arc<Counters>,
}

impl WeightLoader {
    /// A loader on the best adapter of `backend`, with default options.
    pub fn new(backend: Backend) -> Result<WeightLoader> {
        Ok(WeightLoader::with_engine(
            Arc::new(GpuEngine::new(backend)?),
            LoadOptions::default(),
        ))
    }

    /// A loader on the caller's device and queue, so the resident buffers can be used in the
    /// caller's own pipelines. The device's error and device-lost handlers are left alone; build
    /// the engine with [`GpuEngine::from_device`] and [`EngineOptions::install_handlers`] and use
    /// [`WeightLoader::with_engine`] to have the loader's own recorded and checked instead.
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue) -> Result<WeightLoader> {
        Ok(WeightLoader::with_engine(
            Arc::new(GpuEngine::from_device(
                device,
                queue,
                EngineOptions::default(),
            )?),
            LoadOptions::default(),
        ))
    }

    /// A loader on an existing engine (e.g. one with a forced small binding size), with
    /// `options` as the defaults of [`WeightLoader::load`].
    pub fn with_engine(engine: Arc<GpuEngine>, options: LoadOptions) -> WeightLoader {
        WeightLoader {
            engine,
            options,
            counters: Arc::default(),
        }
    }

    /// The engine (device, queue, limits, adapter).
    pub fn engine(&self) -> &Arc<GpuEngine> {
        &self.engine
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        self.engine.device()
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        self.engine.queue()
    }

    /// The adapter (name, backend, driver), as wgpu reports it.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        self.engine.adapter_info()
    }

    /// The default options of [`WeightLoader::load`].
    pub fn options(&self) -> &LoadOptions {
        &self.options
    }

    /// Live totals: models, tensors, resident and allocated bytes.
    pub fn stats(&self) -> ServiceStats {
        self.counters.stats()
    }

    /// [`WeightLoader::load_with`] with the loader's options.
    pub fn load(
        &self,
        file: &GgufFile,
        selection: &Selection,
        residency: Residency,
    ) -> Result<ResidentModel> {
        self.load_with(file, selection, residency, &self.options)
    }

    /// Makes the selected tensors of `file` resident, streaming them through a bounded staging
    /// ring (see the [module docs](self)).
    ///
    /// Errors (nothing is left allocated or registered after any of them):
    /// [`Error::NoSuchTensor`] / [`Error::Selection`] for a bad selection;
    /// [`Error::FileChanged`] when the file at the path no longer matches the map (size, time,
    /// header) or ends early; [`Error::Io`]; [`crate::Error::Gpu`] with
    /// [`GpuError::OutOfMemory`] (the device, or [`LoadOptions::gpu_budget_bytes`]),
    /// [`GpuError::DeviceLost`], [`GpuError::Unsupported`] (no shader and no CPU fallback),
    /// [`GpuError::Timeout`], ...
    pub fn load_with(
        &self,
        file: &GgufFile,
        selection: &Selection,
        residency: Residency,
        options: &LoadOptions,
    ) -> Result<ResidentModel> {
        let mut model = self
            .load_inner(file, selection, residency, options)
            .map_err(|e| self.lost_or(e))?;
        model.tuning = self.tune(&model, options);
        Ok(model)
    }

    /// Tunes matvec for `model`'s matrices in the mode of `options` (see
    /// [`LoadOptions::tuning`]); `None` where it is off. A failure is a report with a warning.
    fn tune(
        &self,
        model: &ResidentModel,
        options: &LoadOptions,
    ) -> Option<crate::gpu::kernels::TuneReport> {
        use crate::gpu::kernels::{TuneReport, TuneSettings};
        use crate::gpu::tune::Tuning;
        let mut warnings = Vec::new();
        let settings = options.tuning.clone().unwrap_or_else(|| {
            let env = Tuning::from_env().unwrap_or_else(|e| {
                warnings.push(format!("{e}: ignored"));
                None
            });
            let device = self.engine.adapter_info().device_type;
            TuneSettings::new(env.unwrap_or_else(|| Tuning::default_for(device)))
        });
        let mode = settings.tuning;
        if mode == Tuning::Off {
            return None;
        }
        let matrices: Vec<&ResidentTensor> = model
            .tensors()
            .iter()
            .filter(|t| t.dims.len() >= 2 && t.format.has_shader())
            .collect();
        let mut report = self
            .engine
            .tune_matvec(&matrices, &[1], &settings)
            .unwrap_or_else(|e| TuneReport {
                tuning: mode,
                rows: Vec::new(),
                cache: None,
                warnings: vec![format!(
                    "tuning failed, every call keeps the engine's default: {e}"
                )],
                seconds: 0.0,
            });
        report.warnings.splice(0..0, warnings);
        Some(report)
    }

    /// A failure of a lost device surfaces as whatever call hit it first (a validation or
    /// mapping error): report the loss itself.
    fn lost_or(&self, e: Error) -> Error {
        match e {
            Error::Gpu(GpuError::DeviceLost(_)) => e,
            Error::Gpu(_) => {
                self.engine
                    .settle(self.options.timeout.min(Duration::from_secs(5)));
                match self.engine.check_device() {
                    Err(lost @ Error::Gpu(GpuError::DeviceLost(_))) => lost,
                    _ => e,
                }
            }
            e => e,
        }
    }

    /// Whether the loader's device is lost ([`GpuEngine::is_lost`]): every call then fails with
    /// [`GpuError::DeviceLost`] until [`WeightLoader::recover`].
    pub fn is_lost(&self) -> bool {
        self.engine.is_lost()
    }

    /// A loader with the same options on a fresh device of the same adapter
    /// ([`GpuEngine::recreate`]): how to go on after [`GpuError::DeviceLost`]. Models loaded
    /// before live on the lost device: drop them and load again through the new loader (which
    /// counts its own [`WeightLoader::stats`]). A loader on a caller's device
    /// ([`WeightLoader::from_device`]) cannot recover by itself: [`GpuError::DeviceLost`].
    pub fn recover(&self) -> Result<WeightLoader> {
        Ok(WeightLoader::with_engine(
            Arc::new(self.engine.recreate()?),
            self.options.clone(),
        ))
    }

    fn load_inner(
        &self,
        file: &GgufFile,
        selection: &Selection,
        residency: Residency,
        options: &LoadOptions,
    ) -> Result<ResidentModel> {
        let start = Instant::now();
        self.engine.check_device()?;
        let selected = selection.resolve(file)?;
        let before = freshness::snapshot(file)?;
        let input = match options.source {
            Source::Mmap => stream::Input::Map(file),
            Source::DirectRead => stream::Input::Read(file, freshness::open_direct(file, false)?),
            Source::Direct => stream::Input::Direct(file, freshness::open_direct(file, true)?),
        };
        let plan = self.plan(file, &selected, residency, options)?;
        let (buffers, resident_alloc) =
            self.allocate_resident(&plan, |i| file.tensors()[i].name.as_str(), options)?;
        let ring = self.allocate_ring(&plan, options)?;
        let transfer = Instant::now();
        let setup_seconds = (transfer - start).as_secs_f64();
        let readers = self.stream(input, &plan, &buffers, &ring, options)?;
        drop(ring);
        freshness::unchanged_since(file, &before)?;
        let transfer_seconds = transfer.elapsed().as_secs_f64();
        let tensors = resident_tensors(file, &plan, buffers, residency.dtype());
        let report = LoadReport {
            tensors: tensors.len(),
            bytes_read: selected.iter().map(|&i| file.tensors()[i].n_bytes).sum(),
            bytes_resident: tensors.iter().map(ResidentTensor::byte_len).sum(),
            seconds: start.elapsed().as_secs_f64(),
            source: options.source,
            staging_bytes: plan.slot_bytes * plan.slots as u64,
            chunks: plan.chunks.len(),
            setup_seconds,
            transfer_seconds,
            readers,
        };
        Ok(ResidentModel::register(
            file.path().to_path_buf(),
            residency,
            tensors,
            report,
            &self.counters,
            resident_alloc,
        ))
    }

    /// Streams `plan` from `input` through `ring` into `buffers`; returns the reader threads used.
    fn stream(
        &self,
        input: stream::Input<'_>,
        plan: &Plan,
        buffers: &[Vec<Arc<wgpu::Buffer>>],
        ring: &Ring,
        options: &LoadOptions,
    ) -> Result<usize> {
        stream::Stream {
            engine: &self.engine,
            input,
            plan,
            buffers,
            staging: &ring.staging,
            scratch: &ring.scratch,
            readers: options.readers,
            timeout: options.timeout,
            progress: options.progress.as_ref(),
        }
        .run()
    }

    /// How each selected tensor reaches the GPU (raw, GPU shader, CPU fallback), cut into parts
    /// and staging chunks for this device; compiles the shaders the plan uses.
    fn plan(
        &self,
        file: &GgufFile,
        selected: &[usize],
        residency: Residency,
        options: &LoadOptions,
    ) -> Result<Plan> {
        let infos: Vec<_> = selected.iter().map(|&i| (i, &file.tensors()[i])).collect();
        let mut paths = Vec::with_capacity(infos.len());
        for (_, t) in &infos {
            paths.push(match residency {
                Residency::Raw => Path::Raw,
                Residency::Dequantised(d) if t.format.has_shader() => Path::Gpu(d),
                Residency::Dequantised(d) if options.cpu_fallback => Path::Cpu(d),
                Residency::Dequantised(dtype) => {
                    return Err(GpuError::Unsupported {
                        format: t.format,
                        dtype,
                    }
                    .into())
                }
            });
        }
        let limits = self.limits(options);
        let data_offsets: Vec<u64> = file.shards().iter().map(|s| s.data_offset()).collect();
        let plan = plan::plan(
            &infos,
            &data_offsets,
            &paths,
            &limits,
            options.staging_bytes,
            options.slots,
        )?;
        for (t, p) in plan.tensors.iter().zip(&paths) {
            if let Path::Gpu(d) = p {
                self.engine.prepare(t.format, *d)?;
            }
        }
        Ok(plan)
    }

    /// The device numbers a plan depends on, under `options`.
    fn limits(&self, options: &LoadOptions) -> Limits {
        let device_max = self.engine.limits().max_buffer_size;
        Limits {
            align: self.engine.offset_alignment().max(4),
            max_binding: self.engine.max_binding_size(),
            max_buffer: options
                .max_buffer_bytes
                .map_or(device_max, |m| m.min(device_max)),
        }
    }

    /// The resident buffers of every part, `[tensor][part]`, counted against the budget;
    /// `name` gives the name of the tensor at an index of the plan's tensors.
    fn allocate_resident<'n>(
        &self,
        plan: &Plan,
        name: impl Fn(usize) -> &'n str,
        options: &LoadOptions,
    ) -> Result<(Vec<Vec<Arc<wgpu::Buffer>>>, Allocation)> {
        let budget = options.gpu_budget_bytes;
        let mut total = self.counters.reserve(0, "", budget)?;
        let mut buffers = Vec::with_capacity(plan.tensors.len());
        for t in &plan.tensors {
            let name = name(t.index);
            let mut parts = Vec::with_capacity(t.parts.len());
            for part in &t.parts {
                let what = format!("allocating {} bytes for {name}", part.buffer_bytes);
                let extra = self.counters.reserve(part.buffer_bytes, &what, budget)?;
                let buffer = buffers::create(
                    self.device(),
                    name,
                    part.buffer_bytes,
                    wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_DST
                        | wgpu::BufferUsages::COPY_SRC,
                    false,
                )?;
                total.absorb(extra);
                parts.push(Arc::new(buffer));
            }
            buffers.push(parts);
        }
        Ok((buffers, total))
    }

    /// The staging ring (mapped for writing) and, when the plan decodes on the GPU, as many
    /// scratch slots; counted against the budget while they live.
    fn allocate_ring(&self, plan: &Plan, options: &LoadOptions) -> Result<Ring> {
        let bytes = plan.slot_bytes * plan.slots as u64 * if plan.any_gpu { 2 } else { 1 };
        let what = format!(
            "allocating {} staging buffers of {} bytes",
            plan.slots, plan.slot_bytes
        );
        let allocation = self
            .counters
            .reserve(bytes, &what, options.gpu_budget_bytes)?;
        let create = |label, usage, mapped| {
            buffers::create(self.device(), label, plan.slot_bytes, usage, mapped)
        };
        let staging = (0..plan.slots)
            .map(|_| {
                create(
                    "gguf-dequant staging",
                    wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                    true,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let scratch = if plan.any_gpu {
            (0..plan.slots)
                .map(|_| {
                    create(
                        "gguf-dequant scratch",
                        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                        false,
                    )
                })
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        self.engine.check_device()?;
        Ok(Ring {
            staging,
            scratch,
            _allocation: allocation,
        })
    }

    /// Records into `encoder` the dequantisation of `job` (caller-owned buffers), bound in
    /// windows of at most the engine's binding size. Nothing is submitted: the caller submits
    /// the encoder, and the output is ready for any later pass of it.
    pub fn record(&self, encoder: &mut wgpu::CommandEncoder, job: &RecordJob<'_>) -> Result<()> {
        let elems = job.format.block_elems() as u64;
        if !job.n_elements.is_multiple_of(elems) {
            return Err(GpuError::InvalidJob(format!(
                "{} elements is not a whole number of {}-value {} blocks",
                job.n_elements, elems, job.format
            ))
            .into());
        }
        self.engine.record(
            encoder,
            &DequantJob {
                format: job.format,
                dtype: job.dtype,
                src: job.src,
                src_offset: job.src_offset,
                n_blocks: job.n_elements / elems,
                dst: job.dst,
                dst_offset: job.dst_offset,
            },
        )
    }

    /// Records into `encoder` the dequantisation of a raw resident tensor (every part) to `dtype`
    /// into `dst` from byte `dst_offset` on (a multiple of 16 and of the offset alignment; the
    /// buffer needs [`ResidentTensor::dequantised_size`] bytes from there).
    pub fn record_tensor(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        tensor: &ResidentTensor,
        dtype: DType,
        dst: &wgpu::Buffer,
        dst_offset: u64,
    ) -> Result<()> {
        if tensor.dtype.is_some() {
            return Err(GpuError::InvalidJob(format!(
                "{} is resident dequantised, not as raw blocks",
                tensor.name
            ))
            .into());
        }
        for part in &tensor.parts {
            self.record(
                encoder,
                &RecordJob {
                    format: tensor.format,
                    dtype,
                    src: &part.buffer,
                    src_offset: part.range.start,
                    dst,
                    dst_offset: dst_offset + part.elements.start * dtype.size() as u64,
                    n_elements: part.elements.end - part.elements.start,
                },
            )?;
        }
        Ok(())
    }

    /// Reads a resident tensor back (all parts, data bytes only): raw blocks, or little-endian
    /// dtype values. A heap copy of one tensor, meant for verification and tests.
    pub fn read_back(&self, tensor: &ResidentTensor) -> Result<Vec<u8>> {
        self.read_back_inner(tensor).map_err(|e| self.lost_or(e))
    }

    fn read_back_inner(&self, tensor: &ResidentTensor) -> Result<Vec<u8>> {
        self.engine.check_device()?;
        let total = tensor.byte_len() as usize;
        let mut out = Vec::new();
        out.try_reserve_exact(total)
            .map_err(|_| Error::OutOfMemory {
                bytes: total,
                what: format!("reading back {}", tensor.name),
            })?;
        let device = self.engine.device();
        for part in &tensor.parts {
            let len = part.range.end - part.range.start;
            let padded = windows::round_up(len, windows::SRC_ALIGN);
            let staging = buffers::create(
                device,
                &format!("reading back {}", tensor.name),
                padded.max(windows::SRC_ALIGN),
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                false,
            )?;
            let mut encoder = device.create_command_encoder(&Default::default());
            let copy = padded.min(part.buffer.size() - part.range.start);
            encoder.copy_buffer_to_buffer(&part.buffer, part.range.start, &staging, 0, copy);
            let index = self
                .engine
                .submit(&format!("reading back {}", tensor.name), encoder)?;
            let start = out.len();
            out.resize(start + len as usize, 0);
            self.engine.read_into(&staging, index, &mut out[start..])?;
        }
        Ok(out)
    }
}

/// The staging ring of one load, and its share of the budget.
struct Ring {
    staging: Vec<wgpu::Buffer>,
    scratch: Vec<wgpu::Buffer>,
    _allocation: Allocation,
}

/// The loaded tensors, from the plan and the buffers the load filled.
fn resident_tensors(
    file: &GgufFile,
    plan: &Plan,
    buffers: Vec<Vec<Arc<wgpu::Buffer>>>,
    dtype: Option<DType>,
) -> Vec<ResidentTensor> {
    plan.tensors
        .iter()
        .zip(buffers)
        .map(|(t, bufs)| {
            let info = &file.tensors()[t.index];
            let elems = t.format.block_elems() as u64;
            let parts = t
                .parts
                .iter()
                .zip(bufs)
                .map(|(p, buffer)| ResidentPart {
                    buffer,
                    range: 0..p.data_bytes,
                    elements: p.first_block * elems..(p.first_block + p.n_blocks) * elems,
                })
                .collect();
            ResidentTensor {
                name: info.name.clone(),
                format: info.format,
                dims: info.dims.clone(),
                n_elements: info.n_elements,
                dtype,
                parts,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<WeightLoader>();
        check::<ResidentModel>();
        check::<ResidentTensor>();
    }
}

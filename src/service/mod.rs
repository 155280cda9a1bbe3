//! The GPU-resident weight loading service: GGUF tensors streamed from the file into wgpu buffers,
//! kept as raw quantised blocks or dequantised to f32/f16/bf16 on the GPU, for inference engines
//! and other wgpu programs.
//!
//! ```no_run
//! use gguf_dequant::gpu::Backend;
//! use gguf_dequant::service::{Residency, Selection, WeightLoader};
//! use gguf_dequant::{DType, GgufFile};
//! # fn main() -> gguf_dequant::Result<()> {
//! let loader = WeightLoader::new(Backend::Auto)?; // or WeightLoader::from_device(device, queue)
//! let file = GgufFile::open("model.gguf")?;
//! let model = loader.load(&file, &Selection::glob(["blk.0.*", "output_norm.weight"]), Residency::Dequantised(DType::F16))?;
//! let t = model.get("blk.0.attn_q.weight").expect("selected");
//! // Bind `t.buffer()` (bytes `t.range()`) in your own pipeline: `t.dims[0]` f16 values per row.
//! println!("{} {} {:?} in {:?}", t.name, t.format, t.dims, t.range());
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
//!   reader thread                          calling thread                     GPU
//!   mmap / read() ─► staging slot k  ──►   unmap k, encode, submit   ──►   copy k ─► dequant k
//!        ▲                                  map_async(k) ─┐                      │
//!        └──────────── slot k free again ◄────────────────┴──── when done ◄──────┘
//! ```
//!
//! * **Bounded staging.** [`LoadOptions::staging_bytes`] (default 64 MiB) split into
//!   [`LoadOptions::slots`] (default 4) mapped `MAP_WRITE` buffers. Each slot is filled with whole
//!   blocks of one or more tensors (small tensors are packed together, big ones split across
//!   slots). The reader thread fills slot k+1.. while the GPU copies and dequantises slot k, so
//!   reading, upload and GPU work overlap; no tensor or file is ever copied whole on the heap, so
//!   host memory stays bounded by the staging budget whatever the model size.
//! * **Dequantisation** runs on the GPU with the engine's shaders: the raw blocks of a slot are
//!   copied into a GPU scratch slot (storage usage) and decoded from there straight into the
//!   tensor's buffer, bound in windows of at most the engine's binding size. Formats without a
//!   shader (F64 and the integer types) are decoded by the CPU codecs on the reader thread into
//!   the slot instead ([`LoadOptions::cpu_fallback`]), so every format loads and the
//!   results are bit-exact either way.
//! * **Sources.** [`Source::Mmap`] copies from the file's memory map; [`Source::DirectRead`]
//!   reads the file with plain `read` calls into a slot-sized buffer (useful when the page cache
//!   should not keep the whole model, or for a file system where mapping is slow).
//! * **Failure.** Every error is typed ([`crate::Error`], with [`crate::Error::hint`]); nothing
//!   panics. A failed load drops every buffer it created and registers nothing:
//!   [`WeightLoader::stats`] is back where it was.
//!
//! # Using resident tensors in your own shaders
//!
//! Dequantised tensors are plain little-endian arrays (`array<f32>`, or `array<u32>` holding two
//! f16/bf16 each) in ggml order: `dims[0]` is the row length. Raw tensors hold the GGUF blocks
//! untouched; [`wgsl_decode_source`] gives the WGSL that decodes them, and
//! [`WeightLoader::record`] / [`WeightLoader::record_tensor`] record a dequantisation into your
//! own `CommandEncoder` for engines that manage their own memory.
//!
//! The service is `Send + Sync`: share one (e.g. in an `Arc`) and load from many threads at once;
//! each load has its own staging ring.

mod plan;
mod stream;

use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use plan::{Limits, Path};

use crate::gguf::TensorInfo;
use crate::gpu::{
    scoped, shaders, upload, Backend, DequantJob, EngineOptions, GpuEngine, GpuError,
};
use crate::{DType, Error, Format, GgufFile, Result};

/// Which tensors of a file to load.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every tensor.
    #[default]
    All,
    /// Exactly these tensors; a name not in the file is [`Error::NoSuchTensor`].
    Names(Vec<String>),
    /// Tensors whose name matches any of these glob patterns (`*`, `?`, `[..]`, `{a,b}`, as the
    /// `globset` crate reads them; `*` also matches `.`). A bad pattern, or one that matches no
    /// tensor, is [`Error::Selection`].
    Glob(Vec<String>),
}

impl Selection {
    /// [`Selection::Names`] from anything string-like.
    pub fn names<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Selection {
        Selection::Names(names.into_iter().map(Into::into).collect())
    }

    /// [`Selection::Glob`] from anything string-like.
    pub fn glob<I: IntoIterator<Item = S>, S: Into<String>>(patterns: I) -> Selection {
        Selection::Glob(patterns.into_iter().map(Into::into).collect())
    }

    /// The selected tensors of `file`, in file order, each once.
    pub fn resolve<'f>(&self, file: &'f GgufFile) -> Result<Vec<&'f TensorInfo>> {
        let all = file.tensors();
        match self {
            Selection::All => Ok(all.iter().collect()),
            Selection::Names(names) => {
                let mut keep = vec![false; all.len()];
                for name in names {
                    let t = file.tensor(name).ok_or_else(|| Error::NoSuchTensor {
                        path: file.path().to_path_buf(),
                        name: name.clone(),
                    })?;
                    if let Some(i) = all.iter().position(|x| std::ptr::eq(x, t)) {
                        keep[i] = true;
                    }
                }
                Ok(all.iter().zip(keep).filter(|x| x.1).map(|x| x.0).collect())
            }
            Selection::Glob(patterns) => {
                let bad = |reason: String| Error::Selection {
                    path: file.path().to_path_buf(),
                    reason,
                };
                let mut builder = globset::GlobSetBuilder::new();
                for p in patterns {
                    let g = globset::GlobBuilder::new(p)
                        .literal_separator(false)
                        .build()
                        .map_err(|e| bad(format!("bad glob `{p}`: {e}")))?;
                    builder.add(g);
                }
                let set = builder
                    .build()
                    .map_err(|e| bad(format!("bad glob set: {e}")))?;
                let mut hits = vec![false; patterns.len()];
                let mut out = Vec::new();
                for t in all {
                    let m = set.matches(&t.name);
                    if !m.is_empty() {
                        out.push(t);
                        for i in m {
                            hits[i] = true;
                        }
                    }
                }
                if let Some(i) = hits.iter().position(|h| !h) {
                    return Err(bad(format!("glob `{}` matches no tensor", patterns[i])));
                }
                Ok(out)
            }
        }
    }
}

/// What the resident buffers hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Residency {
    /// The GGUF blocks exactly as in the file (for the caller's own decoding shaders; see
    /// [`wgsl_decode_source`]), padded with zeros to a multiple of 4 bytes.
    Raw,
    /// Values dequantised to this dtype, bit-exact with the CPU codecs.
    Dequantised(DType),
}

impl Residency {
    /// The dtype of the resident values: `None` for raw blocks.
    pub fn dtype(self) -> Option<DType> {
        match self {
            Residency::Raw => None,
            Residency::Dequantised(d) => Some(d),
        }
    }
}

/// Where the reader takes the tensor bytes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Source {
    /// Copy from the file's memory map (page faults do the reading). A file truncated by another
    /// process while it is mapped can still end the process with `SIGBUS` (the map's contract,
    /// see [`GgufFile`]); prefer [`Source::DirectRead`] where that may happen.
    #[default]
    Mmap,
    /// Plain `read` calls on a new handle of the file into a slot-sized buffer. The handle is
    /// checked against the map first (same length, same header bytes).
    DirectRead,
}

impl Source {
    /// `mmap` or `read`.
    pub const fn name(self) -> &'static str {
        match self {
            Source::Mmap => "mmap",
            Source::DirectRead => "read",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Source {
    type Err = String;

    /// `mmap`, or `read` / `direct` / `direct-read`.
    fn from_str(s: &str) -> std::result::Result<Source, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mmap" => Ok(Source::Mmap),
            "read" | "direct" | "direct-read" | "directread" => Ok(Source::DirectRead),
            _ => Err(format!("unknown source `{s}` (expected mmap or read)")),
        }
    }
}

/// Knobs of a load. `Default` is what [`WeightLoader::load`] uses unless the loader was built
/// with other options.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Host staging budget in bytes, split into [`slots`](Self::slots) (default 64 MiB). Raised
    /// to the smallest slot that holds one aligned run of blocks; lowered for small selections.
    pub staging_bytes: u64,
    /// Staging slots in flight (default 4, at least 2).
    pub slots: usize,
    /// Where the bytes come from (default [`Source::Mmap`]).
    pub source: Source,
    /// Decode formats without a GPU shader on the CPU into the staging slots (default `true`);
    /// `false` makes them [`GpuError::Unsupported`].
    pub cpu_fallback: bool,
    /// Largest buffer to create (default and cap: the device's `max_buffer_size`). Tensors
    /// larger than this are split into parts. Tests set it small.
    pub max_buffer_bytes: Option<u64>,
    /// Fail with [`GpuError::OutOfMemory`] instead of letting this loader's GPU allocations (all
    /// its loads together, staging included) exceed this many bytes. Default: no budget.
    pub gpu_budget_bytes: Option<u64>,
    /// How long to wait for one submission (default 60 s).
    pub timeout: Duration,
    /// Called with the bytes of file data in each staging chunk once it is submitted (e.g. to
    /// drive a progress bar); the calls of one load add up to its `bytes_read`. Default: none.
    pub progress: Option<Progress>,
}

/// A progress callback for [`LoadOptions::progress`]: `Progress::new(move |bytes| bar.inc(bytes))`.
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(u64) + Send + Sync>);

impl Progress {
    /// Wraps `f`, called with the bytes of each submitted chunk.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Progress {
        Progress(Arc::new(f))
    }

    fn report(&self, bytes: u64) {
        (self.0)(bytes)
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Progress(..)")
    }
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            staging_bytes: 64 << 20,
            slots: 4,
            source: Source::Mmap,
            cpu_fallback: true,
            max_buffer_bytes: None,
            gpu_budget_bytes: None,
            timeout: Duration::from_secs(60),
            progress: None,
        }
    }
}

/// One buffer of a resident tensor.
#[derive(Clone, Debug)]
pub struct ResidentPart {
    /// The buffer (usage `STORAGE | COPY_SRC | COPY_DST`).
    pub buffer: Arc<wgpu::Buffer>,
    /// The bytes of the buffer that hold this part's data (the buffer may be a little longer).
    pub range: Range<u64>,
    /// The tensor's elements this part holds (flat index, ggml order).
    pub elements: Range<u64>,
}

/// A tensor on the GPU.
#[derive(Clone, Debug)]
pub struct ResidentTensor {
    /// The tensor's name.
    pub name: String,
    /// Its ggml type in the file.
    pub format: Format,
    /// Dimensions in ggml order (`dims[0]` is the row length).
    pub dims: Vec<u64>,
    /// Number of elements.
    pub n_elements: u64,
    /// The resident element type: `None` for raw blocks.
    pub dtype: Option<DType>,
    /// The buffers, in element order: one, unless the tensor is larger than the largest buffer
    /// ([`LoadOptions::max_buffer_bytes`]); part boundaries are whole blocks, at offsets valid
    /// as storage-binding offsets for any dtype.
    pub parts: Vec<ResidentPart>,
}

impl ResidentTensor {
    /// The (first) buffer.
    pub fn buffer(&self) -> &Arc<wgpu::Buffer> {
        &self.parts[0].buffer
    }

    /// The bytes of [`buffer`](Self::buffer) that hold the (first part's) data.
    pub fn range(&self) -> Range<u64> {
        self.parts[0].range.clone()
    }

    /// Whether the tensor is split over several buffers.
    pub fn is_split(&self) -> bool {
        self.parts.len() > 1
    }

    /// Data bytes on the GPU, all parts together (padding not counted).
    pub fn byte_len(&self) -> u64 {
        self.parts.iter().map(|p| p.range.end - p.range.start).sum()
    }

    /// Bytes a destination buffer needs for [`WeightLoader::record_tensor`] to `dtype` (the
    /// values rounded up to 16 bytes).
    pub fn dequantised_size(&self, dtype: DType) -> u64 {
        upload::round_up(self.n_elements * dtype.size() as u64, 16)
    }
}

/// Figures of one load.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadReport {
    /// Tensors loaded.
    pub tensors: usize,
    /// Bytes of tensor data read from the file.
    pub bytes_read: u64,
    /// Bytes of data resident on the GPU (padding not counted).
    pub bytes_resident: u64,
    /// Wall-clock seconds: planning, compiling shaders on their first use, allocation,
    /// streaming and the wait for the GPU.
    pub seconds: f64,
    /// The source read from.
    pub source: Source,
    /// Staging bytes used: slot size times slots.
    pub staging_bytes: u64,
    /// Staging fills (GPU submissions).
    pub chunks: usize,
}

impl LoadReport {
    /// `bytes_read / seconds`, in GB/s (10⁹ bytes).
    pub fn gb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes_read as f64 / self.seconds / 1e9
        } else {
            0.0
        }
    }
}

/// Live totals of one loader.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Resident models alive.
    pub models: usize,
    /// Their tensors.
    pub tensors: usize,
    /// Their data bytes on the GPU.
    pub resident_bytes: u64,
    /// GPU buffer bytes this loader holds: resident buffers (padding included) plus the staging
    /// and scratch buffers of loads in progress.
    pub allocated_bytes: u64,
}

#[derive(Default, Debug)]
struct Counters {
    models: AtomicUsize,
    tensors: AtomicUsize,
    resident_bytes: AtomicU64,
    allocated_bytes: AtomicU64,
}

/// GPU bytes counted in [`ServiceStats::allocated_bytes`] until dropped.
#[derive(Debug)]
struct Allocation {
    counters: Arc<Counters>,
    bytes: u64,
}

impl Allocation {
    /// Takes over `other`'s bytes.
    fn absorb(&mut self, mut other: Allocation) {
        self.bytes += std::mem::take(&mut other.bytes);
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        self.counters
            .allocated_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// A model counted in [`ServiceStats`] until dropped.
#[derive(Debug)]
struct Registration {
    counters: Arc<Counters>,
    tensors: usize,
    bytes: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.counters.models.fetch_sub(1, Ordering::Relaxed);
        self.counters
            .tensors
            .fetch_sub(self.tensors, Ordering::Relaxed);
        self.counters
            .resident_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Loaded tensors. Dropping it releases the buffers (those nobody else holds an `Arc` to).
#[derive(Debug)]
pub struct ResidentModel {
    path: std::path::PathBuf,
    residency: Residency,
    tensors: Vec<ResidentTensor>,
    /// Indices into `tensors`, sorted by name.
    by_name: Vec<usize>,
    report: LoadReport,
    _registration: Registration,
    _allocation: Allocation,
}

impl ResidentModel {
    /// The file the tensors came from.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Raw or dequantised, and to which dtype.
    pub fn residency(&self) -> Residency {
        self.residency
    }

    /// The tensors, in file order.
    pub fn tensors(&self) -> &[ResidentTensor] {
        &self.tensors
    }

    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<&ResidentTensor> {
        let i = self
            .by_name
            .binary_search_by(|&i| self.tensors[i].name.as_str().cmp(name))
            .ok()?;
        self.tensors.get(self.by_name[i])
    }

    /// Figures of the load.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }
}

/// One dequantisation between caller-owned buffers, for [`WeightLoader::record`].
#[derive(Clone, Copy, Debug)]
pub struct RecordJob<'a> {
    /// The block format of the source.
    pub format: Format,
    /// The output type.
    pub dtype: DType,
    /// Raw blocks (usage `STORAGE`), padded to 4 bytes past the data.
    pub src: &'a wgpu::Buffer,
    /// A multiple of the device's `min_storage_buffer_offset_alignment`.
    pub src_offset: u64,
    /// Output (usage `STORAGE`), with room for the values rounded up to 16 bytes.
    pub dst: &'a wgpu::Buffer,
    /// A multiple of 16 and of `min_storage_buffer_offset_alignment`.
    pub dst_offset: u64,
    /// Elements to decode: a multiple of the format's block size.
    pub n_elements: u64,
}

/// The service: loads GGUF tensors onto one GPU device. `Send + Sync`; share it and load from
/// any number of threads at once.
#[derive(Clone, Debug)]
pub struct WeightLoader {
    engine: Arc<GpuEngine>,
    options: LoadOptions,
    counters: Arc<Counters>,
}

fn file_changed(file: &GgufFile, reason: String) -> Error {
    Error::FileChanged {
        path: file.path().to_path_buf(),
        reason,
    }
}

/// Size and modification time of the file at its path, checked against the map.
fn snapshot(file: &GgufFile) -> Result<(u64, Option<SystemTime>)> {
    let meta = std::fs::metadata(file.path()).map_err(|source| Error::Io {
        path: file.path().to_path_buf(),
        source,
    })?;
    let mapped = file.bytes().len() as u64;
    if meta.len() != mapped {
        return Err(file_changed(
            file,
            format!("it is {} bytes now, {mapped} when mapped", meta.len()),
        ));
    }
    // In-place writes show through the map: the header parsed at open must still be there.
    let same = crate::gguf::parse(file.bytes()).is_ok_and(|h| h == *file.header());
    if !same {
        return Err(file_changed(
            file,
            "its header is no longer the one parsed when it was opened".into(),
        ));
    }
    Ok((meta.len(), meta.modified().ok()))
}

/// Opens the file again for direct reads and checks that it is the mapped one: same length, same
/// header bytes.
fn open_direct(file: &GgufFile) -> Result<std::fs::File> {
    use std::io::Read;
    let io = |source| Error::Io {
        path: file.path().to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(file.path()).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len != file.bytes().len() as u64 {
        return Err(file_changed(
            file,
            format!("it is {len} bytes now, {} when mapped", file.bytes().len()),
        ));
    }
    let header = &file.bytes()[..(file.data_offset() as usize).min(file.bytes().len())];
    let mut buf = vec![0u8; 1 << 16];
    for want in header.chunks(buf.len()) {
        let got = &mut buf[..want.len()];
        f.read_exact(got).map_err(io)?;
        if got != want {
            return Err(file_changed(
                file,
                "its header differs from the mapped one".into(),
            ));
        }
    }
    Ok(f)
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
    /// caller's own pipelines. Installs the engine's error handler and device-lost callback
    /// (replacing the device's); build the engine with [`GpuEngine::from_device`] and
    /// `install_handlers: false` and use [`WeightLoader::with_engine`] to keep yours.
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
        let c = &self.counters;
        ServiceStats {
            models: c.models.load(Ordering::Relaxed),
            tensors: c.tensors.load(Ordering::Relaxed),
            resident_bytes: c.resident_bytes.load(Ordering::Relaxed),
            allocated_bytes: c.allocated_bytes.load(Ordering::Relaxed),
        }
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
        self.load_inner(file, selection, residency, options)
            .map_err(|e| self.lost_or(e))
    }

    /// A failure of a lost device surfaces as whatever call hit it first (a validation or
    /// mapping error): report the loss itself.
    fn lost_or(&self, e: Error) -> Error {
        match e {
            Error::Gpu(GpuError::DeviceLost(_)) => e,
            Error::Gpu(_) => {
                let _ = self.device().poll(wgpu::PollType::Poll);
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

    /// A loader with the same options on a fresh device of the same backend
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
        let before = snapshot(file)?;
        let direct = match options.source {
            Source::DirectRead => Some(open_direct(file)?),
            Source::Mmap => None,
        };

        // Paths and the plan.
        let mut paths = Vec::with_capacity(selected.len());
        for t in &selected {
            paths.push(match residency {
                Residency::Raw => Path::Raw,
                Residency::Dequantised(d) if GpuEngine::supports(t.format) => Path::Gpu(d),
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
        let device_max = self.engine.limits().max_buffer_size;
        let limits = Limits {
            align: self.engine.offset_alignment().max(4),
            max_binding: self.engine.max_binding_size(),
            max_buffer: options
                .max_buffer_bytes
                .map_or(device_max, |m| m.min(device_max)),
        };
        let indexed: Vec<(usize, &TensorInfo)> = selected
            .iter()
            .map(|t| {
                let i = file
                    .tensors()
                    .iter()
                    .position(|x| std::ptr::eq(x, *t))
                    .unwrap_or_default();
                (i, *t)
            })
            .collect();
        let plan = plan::plan(
            &indexed,
            file.data_offset(),
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

        // Resident buffers, then the staging ring.
        let device = self.engine.device();
        let mut resident_alloc = self.reserve(0, "", options)?;
        let mut buffers: Vec<Vec<Arc<wgpu::Buffer>>> = Vec::with_capacity(plan.tensors.len());
        for t in &plan.tensors {
            let name = &file.tensors()[t.index].name;
            let mut parts = Vec::with_capacity(t.parts.len());
            for part in &t.parts {
                let what = format!("allocating {} bytes for {name}", part.buffer_bytes);
                let extra = self.reserve(part.buffer_bytes, &what, options)?;
                let buffer = scoped(device, &what, || {
                    device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(name),
                        size: part.buffer_bytes,
                        usage: wgpu::BufferUsages::STORAGE
                            | wgpu::BufferUsages::COPY_DST
                            | wgpu::BufferUsages::COPY_SRC,
                        mapped_at_creation: false,
                    })
                })?;
                resident_alloc.absorb(extra);
                parts.push(Arc::new(buffer));
            }
            buffers.push(parts);
        }
        let ring = plan.slot_bytes * plan.slots as u64 * if plan.any_gpu { 2 } else { 1 };
        let what = format!(
            "allocating {} staging buffers of {} bytes",
            plan.slots, plan.slot_bytes
        );
        let _ring_alloc = self.reserve(ring, &what, options)?;
        let (staging, scratch) = scoped(device, &what, || {
            let staging: Vec<wgpu::Buffer> = (0..plan.slots)
                .map(|_| {
                    device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("gguf-dequant staging"),
                        size: plan.slot_bytes,
                        usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                        mapped_at_creation: true,
                    })
                })
                .collect();
            let scratch: Vec<wgpu::Buffer> = if plan.any_gpu {
                (0..plan.slots)
                    .map(|_| {
                        device.create_buffer(&wgpu::BufferDescriptor {
                            label: Some("gguf-dequant scratch"),
                            size: plan.slot_bytes,
                            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                            mapped_at_creation: false,
                        })
                    })
                    .collect()
            } else {
                Vec::new()
            };
            (staging, scratch)
        })?;
        self.engine.check_device()?;

        stream::Stream {
            engine: &self.engine,
            file,
            source: options.source,
            plan: &plan,
            buffers: &buffers,
            staging: &staging,
            scratch: &scratch,
            direct,
            timeout: options.timeout,
            progress: options.progress.as_ref(),
        }
        .run()?;
        drop((staging, scratch));
        let after = snapshot(file)?;
        if after.1 != before.1 {
            return Err(file_changed(
                file,
                "it was modified while it was being loaded".into(),
            ));
        }

        // Success: build and register the model.
        let dtype = residency.dtype();
        let mut tensors = Vec::with_capacity(plan.tensors.len());
        for (t, bufs) in plan.tensors.iter().zip(buffers) {
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
            tensors.push(ResidentTensor {
                name: info.name.clone(),
                format: info.format,
                dims: info.dims.clone(),
                n_elements: info.n_elements,
                dtype,
                parts,
            });
        }
        let mut by_name: Vec<usize> = (0..tensors.len()).collect();
        by_name.sort_by(|&a, &b| tensors[a].name.cmp(&tensors[b].name));
        let bytes_resident: u64 = tensors.iter().map(ResidentTensor::byte_len).sum();
        let report = LoadReport {
            tensors: tensors.len(),
            bytes_read: selected.iter().map(|t| t.n_bytes).sum(),
            bytes_resident,
            seconds: start.elapsed().as_secs_f64(),
            source: options.source,
            staging_bytes: plan.slot_bytes * plan.slots as u64,
            chunks: plan.chunks.len(),
        };
        let c = &self.counters;
        c.models.fetch_add(1, Ordering::Relaxed);
        c.tensors.fetch_add(tensors.len(), Ordering::Relaxed);
        c.resident_bytes
            .fetch_add(bytes_resident, Ordering::Relaxed);
        Ok(ResidentModel {
            path: file.path().to_path_buf(),
            residency,
            _registration: Registration {
                counters: self.counters.clone(),
                tensors: tensors.len(),
                bytes: bytes_resident,
            },
            tensors,
            by_name,
            report,
            _allocation: resident_alloc,
        })
    }

    /// Counts `bytes` as allocated, or fails when that would pass the budget.
    fn reserve(&self, bytes: u64, what: &str, options: &LoadOptions) -> Result<Allocation> {
        let now = self
            .counters
            .allocated_bytes
            .fetch_add(bytes, Ordering::Relaxed)
            + bytes;
        let alloc = Allocation {
            counters: self.counters.clone(),
            bytes,
        };
        if let Some(budget) = options.gpu_budget_bytes {
            if now > budget {
                return Err(GpuError::OutOfMemory {
                    what: what.to_string(),
                    message: format!(
                        "the loader's GPU budget of {budget} bytes would be exceeded ({now} bytes)"
                    ),
                }
                .into());
            }
        }
        Ok(alloc)
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
            let padded = upload::round_up(len, 4);
            let what = format!("reading back {}", tensor.name);
            let staging = scoped(device, &what, || {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("gguf-dequant readback"),
                    size: padded.max(4),
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })?;
            let mut encoder = device.create_command_encoder(&Default::default());
            let copy = padded.min(part.buffer.size() - part.range.start);
            let index = scoped(device, &what, || {
                encoder.copy_buffer_to_buffer(&part.buffer, part.range.start, &staging, 0, copy);
                self.engine.queue().submit([encoder.finish()])
            })?;
            let start = out.len();
            out.resize(start + len as usize, 0);
            crate::gpu::readback::read_into(
                device,
                &staging,
                index,
                self.options.timeout,
                &mut out[start..],
            )?;
        }
        self.engine.check_device()?;
        Ok(out)
    }
}

/// The WGSL that decodes `format`'s blocks, for composing into your own shaders; `None` for a
/// format without a shader ([`GpuEngine::supports`]).
///
/// It is the engine's own shader up to (not including) its output packer and entry point: the
/// shared helpers (`shaders/lib/bytes.wgsl`, `float.wgsl`), the format's lookup tables and
/// `shaders/formats/<format>.wgsl`. It declares the constants `BLOCK_ELEMS` and `BLOCK_BYTES`
/// and
///
/// ```wgsl
/// fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2>
/// ```
///
/// which returns the **f32 bit patterns** (`bitcast<f32>` them) of values `8 * part .. 8 * part
/// + 8` of the block whose first byte is at byte offset `base` of `tile`. For one-value formats
/// (`BLOCK_ELEMS == 1`: F32, F16, BF16, F8_E4M3) `part` is 0 and the 8 values are those of the 8
/// consecutive elements from `base` on. The results are bit-exact with the CPU codecs.
///
/// **Your part:** declare, before or after this source, a module-scope `tile: array<u32>` that
/// holds the raw bytes, little-endian, e.g. a raw resident tensor bound directly:
///
/// ```wgsl
/// @group(0) @binding(0) var<storage, read> tile: array<u32>; // a raw ResidentTensor's buffer
/// ```
///
/// (or a `var<workgroup> tile: array<u32, N>` you fill first). Reads may touch the word after a
/// block's last byte, which the resident buffers' 4-byte padding provides. Avoid the names the
/// source declares: its functions (`load_u8`, `load_u32`, `f16_le`, `dequant8`, ...) and
/// constants (`BLOCK_ELEMS`, `BLOCK_BYTES`, names prefixed with the format, `EXP_MASK_F32`,
/// `MANT_MASK_F32`, the `KVALUES_*` tables). Offsets are u32: bind at most 4 GiB.
///
/// The i-quants with grids (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) also declare
/// `@group(0) @binding(3) var<storage, read> grids: array<u32>;`: bind a read-only storage buffer
/// holding [`crate::gpu::tables::words`] there (or rename the binding in the source you compose).
///
/// ```
/// use gguf_dequant::service::wgsl_decode_source;
/// use gguf_dequant::Format;
///
/// let decode = wgsl_decode_source(Format::Q4_0).expect("Q4_0 has a shader");
/// let my_shader = format!(
///     "@group(0) @binding(0) var<storage, read> tile: array<u32>;\n\
///      @group(0) @binding(1) var<storage, read_write> out: array<f32>;\n\
///      {decode}\n\
///      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n\
///          let block = id.x / 4u; let part = id.x % 4u;\n\
///          if (block >= arrayLength(&out) / BLOCK_ELEMS) {{ return; }}\n\
///          let v = dequant8(block * BLOCK_BYTES, part);\n\
///          for (var i = 0u; i < 8u; i++) {{\n\
///              out[block * BLOCK_ELEMS + part * 8u + i] = bitcast<f32>(v[i / 4u][i % 4u]);\n\
///          }}\n\
///      }}"
/// );
/// assert!(my_shader.contains("fn dequant8"));
/// ```
pub fn wgsl_decode_source(format: Format) -> Option<&'static str> {
    let full = shaders::source(format, DType::F32)?;
    let cut = full.find("// ---- shaders/lib/out_f32.wgsl ----")?;
    full.get(..cut)
}

/// The process's peak resident set size (`VmHWM` of `/proc/self/status`), in bytes; `None` where
/// that is not available (not Linux).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
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

    #[test]
    fn decode_source_for_every_shader_format() {
        for &f in Format::ALL {
            let src = wgsl_decode_source(f);
            assert_eq!(src.is_some(), GpuEngine::supports(f), "{f}");
            if let Some(s) = src {
                assert!(s.contains("fn dequant8") && !s.contains("@compute"), "{f}");
                assert!(!s.contains("fn store8"), "{f}");
                // Only the i-quant grid table is bound, at binding 3, as documented.
                let bindings = s.matches("@binding").count();
                let grids =
                    s.contains("@group(0) @binding(3) var<storage, read> grids: array<u32>;");
                assert_eq!(bindings, usize::from(grids), "{f}");
            }
        }
    }

    #[test]
    fn peak_rss_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes().unwrap() > 1 << 20);
        }
    }
}

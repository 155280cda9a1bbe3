//! What a load is asked for and what it reports: [`Residency`], [`Source`], [`LoadOptions`]
//! (with [`Progress`]), [`LoadReport`], and [`RecordJob`] for recording into a caller's encoder.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::{DType, Format};

/// What the resident buffers hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Residency {
    /// The GGUF blocks exactly as in the file (for the caller's own decoding shaders; see
    /// [`crate::gpu::shaders::wgsl_decode_source`]), padded with zeros to a multiple of 4 bytes.
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
    /// see [`crate::GgufFile`]); prefer [`Source::DirectRead`] where that may happen.
    Mmap,
    /// Plain `pread` calls on a new handle of each file, straight into the mapped staging slot
    /// (no copy in between). The handle is checked against the map first (same length, same
    /// header bytes). A file truncated meanwhile is [`crate::Error::FileChanged`], never a signal. The
    /// default: as fast as the map or faster, with less CPU time (README, "Loading a model").
    #[default]
    DirectRead,
    /// Like [`Source::DirectRead`], with `O_DIRECT` (Linux): aligned reads that bypass the page
    /// cache, through a 4 MiB bounce buffer per reader, for a model read once from a fast disk
    /// whose pages should not push anything else out of memory. A file system that refuses it
    /// (tmpfs, some overlays) is an [`crate::Error::Io`] saying so; elsewhere than Linux too.
    Direct,
}

impl Source {
    /// `mmap`, `read` or `direct`.
    pub const fn name(self) -> &'static str {
        match self {
            Source::Mmap => "mmap",
            Source::DirectRead => "read",
            Source::Direct => "direct",
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

    /// `mmap`, `read` (or `direct-read`), or `direct` (or `o_direct`).
    fn from_str(s: &str) -> std::result::Result<Source, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mmap" => Ok(Source::Mmap),
            "read" | "direct-read" | "directread" => Ok(Source::DirectRead),
            "direct" | "o_direct" | "o-direct" => Ok(Source::Direct),
            _ => Err(format!(
                "unknown source `{s}` (expected mmap, read or direct)"
            )),
        }
    }
}

/// Knobs of a load. `Default` is what [`WeightLoader::load`](super::WeightLoader::load) uses unless the loader was built
/// with other options.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Host staging budget in bytes, split into [`slots`](Self::slots) (default 64 MiB). Raised
    /// to the smallest slot that holds one aligned run of blocks; lowered for small selections,
    /// and to slots of 4 MiB for a load that dequantises nothing on the GPU (larger slots only
    /// cost setup time there).
    pub staging_bytes: u64,
    /// Staging slots in flight (default 4, at least 2).
    pub slots: usize,
    /// Where the bytes come from (default [`Source::DirectRead`]).
    pub source: Source,
    /// Reader threads filling staging slots at once (default 2; at most one per slot). Each may
    /// hold two slot-sized buffers of its own for formats decoded on the CPU, and a 4 MiB one
    /// for [`Source::Direct`].
    pub readers: usize,
    /// Decode formats without a GPU shader on the CPU into the staging slots (default `true`);
    /// `false` makes them [`crate::gpu::GpuError::Unsupported`].
    pub cpu_fallback: bool,
    /// Largest buffer to create (default and cap: the device's `max_buffer_size`). Tensors
    /// larger than this are split into parts. Tests set it small.
    pub max_buffer_bytes: Option<u64>,
    /// Fail with [`crate::gpu::GpuError::OutOfMemory`] instead of letting this loader's GPU allocations (all
    /// its loads together, staging included) exceed this many bytes. Default: no budget.
    pub gpu_budget_bytes: Option<u64>,
    /// How long to wait for one submission (default 60 s).
    pub timeout: Duration,
    /// Called with the bytes of file data in each staging chunk once it is submitted (e.g. to
    /// drive a progress bar); the calls of one load add up to its `bytes_read`. Default: none.
    pub progress: Option<Progress>,
    /// How to tune matvec for the loaded matrices once they are resident
    /// ([`crate::gpu::GpuEngine::tune_matvec`], one column; the report is
    /// [`super::ResidentModel::tuning`]). `None` (the default): the default budgets and cache, in
    /// the mode `GGUF_DEQUANT_TUNE` names, else `on` on GPUs and `off` on CPU adapters. A failed
    /// tuning never fails the load: every call then keeps the engine's default, and the report
    /// says why.
    pub tuning: Option<crate::gpu::kernels::TuneSettings>,
}

/// A progress callback for [`LoadOptions::progress`]: `Progress::new(move |bytes| bar.inc(bytes))`.
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(u64) + Send + Sync>);

impl Progress {
    /// Wraps `f`, called with the bytes of each submitted chunk.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Progress {
        Progress(Arc::new(f))
    }

    pub(super) fn report(&self, bytes: u64) {
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
            source: Source::DirectRead,
            readers: 2,
            cpu_fallback: true,
            max_buffer_bytes: None,
            gpu_budget_bytes: None,
            timeout: Duration::from_secs(60),
            progress: None,
            tuning: None,
        }
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
    /// Seconds of `seconds` before the first byte is read: selection, freshness checks,
    /// planning, compiling shaders on their first use, allocating the resident buffers and the
    /// staging ring.
    pub setup_seconds: f64,
    /// Seconds of `seconds` moving the bytes: reading, staging, copying (and dequantising)
    /// until the GPU has finished, and the freshness check after.
    pub transfer_seconds: f64,
    /// Reader threads used (0 for a load with nothing to read).
    pub readers: usize,
}

impl LoadReport {
    /// `bytes_read / seconds`, in GB/s (10⁹ bytes).
    pub fn gb_per_s(&self) -> f64 {
        gb_per_s(self.bytes_read, self.seconds)
    }

    /// `bytes_read / transfer_seconds`, in GB/s: the speed of the transfer alone.
    pub fn transfer_gb_per_s(&self) -> f64 {
        gb_per_s(self.bytes_read, self.transfer_seconds)
    }
}

/// `bytes / seconds` in GB/s (10⁹ bytes), 0 for no time.
pub(super) fn gb_per_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    }
}

/// One dequantisation between caller-owned buffers, for [`WeightLoader::record`](super::WeightLoader::record).
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

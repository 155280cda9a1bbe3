//! Resident tensors and the loader's accounting: the buffers a load made, how a shader binds a
//! run of their elements, and the live totals of models, tensors and GPU bytes.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::{LoadReport, Residency};
use crate::gpu::kernels::{PartLayout, WeightLayout};
use crate::gpu::{windows, GpuError};
use crate::{DType, Format, Result};

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
    /// ([`super::LoadOptions::max_buffer_bytes`]); part boundaries are whole blocks, at offsets valid
    /// as storage-binding offsets for any dtype.
    pub parts: Vec<ResidentPart>,
}

impl ResidentTensor {
    /// Where `elements` (a run inside one part; for raw tensors starting on a block boundary)
    /// lie, bound from an offset that is a multiple of `align` (the device's
    /// `min_storage_buffer_offset_alignment`, a power of two): the part, the buffer binding
    /// and how far into the binding the run starts. A whole tensor can be larger than one
    /// storage binding; bind what a pass needs with this instead of computing offsets.
    pub fn bind_elements(&self, elements: Range<u64>, align: u64) -> Result<ElementBinding<'_>> {
        let b = self.layout().bind(elements, align)?;
        Ok(ElementBinding {
            part: b.part,
            buffer: &self.parts[b.part].buffer,
            offset: b.offset,
            size: b.size,
            skip_bytes: b.skip_bytes,
            skip_elements: b.skip_elements,
        })
    }

    /// The tensor as the kernels' planner sees it: its type, dims and where its parts lie.
    pub fn layout(&self) -> WeightLayout<'_> {
        WeightLayout {
            name: &self.name,
            format: self.format,
            dims: &self.dims,
            n_elements: self.n_elements,
            dtype: self.dtype,
            parts: self
                .parts
                .iter()
                .map(|p| PartLayout {
                    range: p.range.clone(),
                    elements: p.elements.clone(),
                    buffer_len: p.buffer.size(),
                })
                .collect(),
        }
    }

    /// A raw tensor in one new buffer of `engine`'s device holding `raw`, whole blocks of
    /// `format` with dims `dims` (ggml order), as they are: weights an engine has in memory
    /// rather than in a file.
    pub fn upload(
        engine: &crate::gpu::GpuEngine,
        name: &str,
        format: Format,
        dims: &[u64],
        raw: &[u8],
    ) -> Result<ResidentTensor> {
        let (_, bytes) = raw_size(name, format, dims)?;
        if bytes != raw.len() as u64 {
            return Err(GpuError::InvalidJob(format!(
                "{name}: dims {dims:?} of {format} take {bytes} bytes, not {}",
                raw.len()
            ))
            .into());
        }
        let buffer = crate::gpu::buffers::upload(engine.device(), name, raw)?;
        ResidentTensor::from_buffer(name, format, dims, Arc::new(buffer))
    }

    /// A raw tensor over a buffer of the caller's (e.g. a dequantiser's f16 output): `format`
    /// blocks with dims `dims` from byte 0 of `buffer`, which holds at least their bytes rounded
    /// up to 4. No data is copied.
    pub fn from_buffer(
        name: &str,
        format: Format,
        dims: &[u64],
        buffer: Arc<wgpu::Buffer>,
    ) -> Result<ResidentTensor> {
        let (n_elements, bytes) = raw_size(name, format, dims)?;
        if bytes.next_multiple_of(4) > buffer.size() {
            return Err(GpuError::InvalidJob(format!(
                "{name}: {bytes} bytes of {format} do not fit the buffer's {}",
                buffer.size()
            ))
            .into());
        }
        Ok(ResidentTensor {
            name: name.to_string(),
            format,
            dims: dims.to_vec(),
            n_elements,
            dtype: None,
            parts: vec![ResidentPart {
                buffer,
                range: 0..bytes,
                elements: 0..n_elements,
            }],
        })
    }

    /// Whether the tensor is split over several buffers.
    pub fn is_split(&self) -> bool {
        self.parts.len() > 1
    }

    /// Data bytes on the GPU, all parts together (padding not counted).
    pub fn byte_len(&self) -> u64 {
        self.parts.iter().map(|p| p.range.end - p.range.start).sum()
    }

    /// Bytes a destination buffer needs for [`super::WeightLoader::record_tensor`] to `dtype` (the
    /// values rounded up to 16 bytes).
    pub fn dequantised_size(&self, dtype: DType) -> u64 {
        windows::round_up(self.n_elements * dtype.size() as u64, windows::DST_ALIGN)
    }
}

/// The elements and raw bytes of a `format` tensor with `dims`, or an error naming `name`.
fn raw_size(name: &str, format: Format, dims: &[u64]) -> Result<(u64, u64)> {
    let (elems, block) = (format.block_elems() as u64, format.block_bytes() as u64);
    dims.iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .filter(|&n| n > 0 && n.is_multiple_of(elems))
        .map(|n| (n, n / elems * block))
        .ok_or_else(|| {
            GpuError::InvalidJob(format!(
                "{name}: dims {dims:?} are not whole {format} blocks"
            ))
            .into()
        })
}

/// A run of a resident tensor's elements as a buffer binding, from
/// [`ResidentTensor::bind_elements`].
#[derive(Clone, Copy, Debug)]
pub struct ElementBinding<'a> {
    /// Index of the part (in [`ResidentTensor::parts`]) that holds the run.
    pub part: usize,
    /// That part's buffer.
    pub buffer: &'a wgpu::Buffer,
    /// Byte offset of the binding: a multiple of the alignment asked for.
    pub offset: u64,
    /// Bytes bound: up to the end of the run (for raw tensors, of its last block), rounded up to
    /// 4 bytes.
    pub size: u64,
    /// Bytes from `offset` to the run's first element (raw tensors: to its block).
    pub skip_bytes: u64,
    /// For a dequantised tensor: values from `offset` to the run's first element (`skip_bytes`
    /// over the dtype size), the index to start at in the bound array. `None` for raw blocks.
    pub skip_elements: Option<u64>,
}

impl ElementBinding<'_> {
    /// The binding, for a `BindGroupEntry`.
    pub fn resource(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: self.buffer,
            offset: self.offset,
            size: wgpu::BufferSize::new(self.size),
        })
    }
}

/// Loaded tensors. Dropping it releases the buffers (those nobody else holds an `Arc` to).
#[derive(Debug)]
pub struct ResidentModel {
    path: PathBuf,
    residency: Residency,
    tensors: Vec<ResidentTensor>,
    /// Indices into `tensors`, sorted by name.
    by_name: Vec<usize>,
    report: LoadReport,
    /// What the tuner did after the load (`None`: tuning off).
    pub(super) tuning: Option<crate::gpu::kernels::TuneReport>,
    _registration: Registration,
    _allocation: Allocation,
}

impl ResidentModel {
    /// Registers `tensors` (loaded from `path`) in `counters`, holding `allocation`.
    pub(super) fn register(
        path: PathBuf,
        residency: Residency,
        tensors: Vec<ResidentTensor>,
        report: LoadReport,
        counters: &Arc<Counters>,
        allocation: Allocation,
    ) -> ResidentModel {
        let mut by_name: Vec<usize> = (0..tensors.len()).collect();
        by_name.sort_by(|&a, &b| tensors[a].name.cmp(&tensors[b].name));
        counters.models.fetch_add(1, Ordering::Relaxed);
        counters.tensors.fetch_add(tensors.len(), Ordering::Relaxed);
        counters
            .resident_bytes
            .fetch_add(report.bytes_resident, Ordering::Relaxed);
        ResidentModel {
            path,
            residency,
            _registration: Registration {
                counters: counters.clone(),
                tensors: tensors.len(),
                bytes: report.bytes_resident,
            },
            tensors,
            by_name,
            report,
            tuning: None,
            _allocation: allocation,
        }
    }

    /// The file the tensors came from.
    pub fn path(&self) -> &Path {
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

    /// What the tuner did once the model was resident ([`super::LoadOptions::tuning`]); `None`
    /// where tuning was off.
    pub fn tuning(&self) -> Option<&crate::gpu::kernels::TuneReport> {
        self.tuning.as_ref()
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

/// The live totals of one loader, shared by its models and loads.
#[derive(Default, Debug)]
pub(super) struct Counters {
    models: AtomicUsize,
    tensors: AtomicUsize,
    resident_bytes: AtomicU64,
    allocated_bytes: AtomicU64,
}

/// GPU bytes counted in [`ServiceStats::allocated_bytes`] until dropped.
#[derive(Debug)]
pub(super) struct Allocation {
    counters: Arc<Counters>,
    bytes: u64,
}

impl Allocation {
    /// Takes over `other`'s bytes.
    pub(super) fn absorb(&mut self, mut other: Allocation) {
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

impl Counters {
    /// The totals now.
    pub(super) fn stats(&self) -> ServiceStats {
        ServiceStats {
            models: self.models.load(Ordering::Relaxed),
            tensors: self.tensors.load(Ordering::Relaxed),
            resident_bytes: self.resident_bytes.load(Ordering::Relaxed),
            allocated_bytes: self.allocated_bytes.load(Ordering::Relaxed),
        }
    }

    /// Counts `bytes` as allocated, or fails when that would pass `budget`.
    pub(super) fn reserve(
        self: &Arc<Self>,
        bytes: u64,
        what: &str,
        budget: Option<u64>,
    ) -> Result<Allocation> {
        let now = self.allocated_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let alloc = Allocation {
            counters: self.clone(),
            bytes,
        };
        if let Some(budget) = budget {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn tensor(dtype: Option<DType>, format: Format, runs: &[(u64, u64)]) -> ResidentTensor {
        let (device, _) = wgpu::Device::noop(&wgpu::DeviceDescriptor::default());
        let n_elements = runs.last().map_or(0, |r| r.1);
        let per = |n: u64| match dtype {
            Some(d) => n * d.size() as u64,
            None => n / format.block_elems() as u64 * format.block_bytes() as u64,
        };
        let parts = runs
            .iter()
            .map(|&(first, last)| {
                let bytes = per(last - first);
                ResidentPart {
                    buffer: Arc::new(device.create_buffer(&wgpu::BufferDescriptor {
                        label: None,
                        size: bytes.next_multiple_of(16),
                        usage: wgpu::BufferUsages::STORAGE,
                        mapped_at_creation: false,
                    })),
                    range: 0..bytes,
                    elements: first..last,
                }
            })
            .collect();
        ResidentTensor {
            name: "t".into(),
            format,
            dims: vec![64, n_elements / 64],
            n_elements,
            dtype,
            parts,
        }
    }

    #[test]
    fn bind_elements_finds_the_part_and_aligns_the_offset() {
        // Two parts of a dequantised f16 tensor: elements 0..4096 and 4096..8192.
        let t = tensor(Some(DType::F16), Format::Q4_0, &[(0, 4096), (4096, 8192)]);
        let b = t.bind_elements(4096 + 200..4096 + 264, 256).unwrap();
        assert_eq!(b.part, 1);
        assert_eq!(b.offset, 256); // byte 400 rounded down to 256
        assert_eq!(b.skip_bytes, 144);
        assert_eq!(b.skip_elements, Some(72));
        assert_eq!(b.size, 144 + 64 * 2);
        let whole = t.bind_elements(0..4096, 64).unwrap();
        assert_eq!((whole.part, whole.offset, whole.size), (0, 0, 8192));
        // A run across the part boundary, an empty run, a run past the end, a bad alignment.
        for (r, align) in [
            (4000..4200, 16),
            (10..10, 16),
            (8000..8200, 16),
            (0..32, 48),
        ] {
            assert!(matches!(
                t.bind_elements(r, align),
                Err(Error::Gpu(GpuError::InvalidJob(_)))
            ));
        }
    }

    #[test]
    fn bind_elements_of_raw_blocks_starts_on_a_block() {
        // Raw Q4_0: 18-byte blocks of 32 values; one part.
        let t = tensor(None, Format::Q4_0, &[(0, 32 * 100)]);
        let b = t.bind_elements(32 * 10..32 * 12, 64).unwrap();
        assert_eq!(b.offset, 128); // block 10 starts at byte 180
        assert_eq!(b.skip_bytes, 52);
        assert_eq!(b.skip_elements, None);
        assert_eq!(b.size, (52 + 2 * 18u64).next_multiple_of(4));
        assert!(t.bind_elements(5..40, 64).is_err());
    }
}

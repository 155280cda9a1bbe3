//! Planning a load: each selected tensor is cut into *parts* (one GPU buffer each, at most
//! `max_buffer` bytes) and the parts into *segments* packed into staging-slot-sized *chunks*. One
//! chunk is one slot fill, one submission. The plan is metadata only (a few words per segment).

use crate::gguf::TensorInfo;
use crate::gpu::windows;
use crate::{DType, Format};

/// How a tensor's blocks reach its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// Raw blocks copied from the staging slot into the resident buffer.
    Raw,
    /// Raw blocks copied into a GPU scratch slot and dequantised by the engine's shader.
    Gpu(DType),
    /// Decoded on the CPU (a format without a shader) into the slot, then copied.
    Cpu(DType),
}

impl Path {
    /// Bytes one block takes in the staging slot.
    fn slot_bytes_per_block(self, format: Format) -> u64 {
        match self {
            Path::Raw | Path::Gpu(_) => format.block_bytes() as u64,
            Path::Cpu(d) => (format.block_elems() * d.size()) as u64,
        }
    }

    /// Bytes one block takes in the resident buffer.
    fn resident_bytes_per_block(self, format: Format) -> u64 {
        match self {
            Path::Raw => format.block_bytes() as u64,
            Path::Gpu(d) | Path::Cpu(d) => (format.block_elems() * d.size()) as u64,
        }
    }

    /// Padding a resident buffer keeps after its data (the engine's binding rules).
    fn buffer_pad(self) -> u64 {
        match self {
            Path::Raw => 4,
            _ => 16,
        }
    }
}

/// One resident buffer of a tensor: blocks `first .. first + count`.
#[derive(Clone, Debug)]
pub(crate) struct PartPlan {
    pub first_block: u64,
    pub n_blocks: u64,
    /// Data bytes in the buffer.
    pub data_bytes: u64,
    /// Buffer size: the data padded as the engine's bindings need.
    pub buffer_bytes: u64,
}

/// One selected tensor.
#[derive(Clone, Debug)]
pub(crate) struct TensorPlan {
    /// Index into `file.tensors()`.
    pub index: usize,
    pub format: Format,
    pub path: Path,
    /// The shard (file) of a split set holding the tensor.
    pub shard: usize,
    /// Absolute offset of the tensor's first byte in its shard's file.
    pub file_offset: u64,
    pub parts: Vec<PartPlan>,
}

/// A run of blocks of one part that goes through one slot.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    /// Index into `Plan::tensors`.
    pub tensor: usize,
    pub part: usize,
    /// The shard (file) the raw bytes are in.
    pub shard: usize,
    /// Absolute offset of the raw bytes in the shard's file.
    pub file_offset: u64,
    /// Raw bytes read from the file.
    pub raw_len: u64,
    /// Where the bytes go in the slot.
    pub slot_offset: u64,
    /// Bytes of the slot the segment fills (raw or decoded), before padding.
    pub slot_data: u64,
    /// `slot_data` rounded up to 4: the bytes copied.
    pub slot_len: u64,
    /// Byte offset in the part's buffer.
    pub dst_offset: u64,
    pub n_blocks: u64,
}

/// One fill of one staging slot.
#[derive(Clone, Debug, Default)]
pub(crate) struct Chunk {
    pub segments: Vec<Segment>,
    /// Bytes of the slot in use (a multiple of 4).
    pub used: u64,
    /// Whether any segment is dequantised on the GPU (the chunk then goes through a scratch slot).
    pub has_gpu: bool,
}

/// The whole load.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub tensors: Vec<TensorPlan>,
    pub chunks: Vec<Chunk>,
    /// Bytes of each staging slot.
    pub slot_bytes: u64,
    /// Number of staging slots.
    pub slots: usize,
    pub any_gpu: bool,
}

/// Device numbers the plan depends on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `min_storage_buffer_offset_alignment` (a power of two, at least 4).
    pub align: u64,
    /// The engine's storage-binding size in use.
    pub max_binding: u64,
    /// Largest buffer to create.
    pub max_buffer: u64,
}

/// The largest staging slot of a load with no GPU dequantisation. Creating a slot touches all its
/// memory (wgpu zero-fills a new mapping), which is setup time before the first byte moves, and
/// plain copies go no faster from larger slots: on lavapipe the Gemma model's raw load spends
/// 30 ms creating 4 × 16 MiB and 7 ms creating 4 × 4 MiB, for the same transfer time. Shaders
/// want the larger slots (larger dispatches: f16 0.75 s against 0.85–0.95 s with 4 MiB ones).
pub(crate) const COPY_SLOT_MAX: u64 = 4 << 20;

/// Blocks whose staging bytes are a multiple of 4 (so copies stay 4-byte aligned).
fn copy_quantum(per_block: u64) -> u64 {
    4 / windows::gcd(4, per_block)
}

/// The block step that keeps a part's offsets usable as binding offsets for every output dtype.
fn part_step(format: Format, align: u64) -> u64 {
    // Offsets valid for 2-byte outputs are valid for 4-byte ones (the step is a power-of-two
    // multiple); a huge limit leaves only the alignment rule.
    windows::plan(format, 2, u64::MAX >> 8, align).map_or(1, |p| p.step_blocks)
}

/// The smallest run of blocks a segment of `path` may be cut to, and the slot bytes it takes.
fn quantum(format: Format, path: Path, lim: &Limits) -> Result<u64, crate::gpu::GpuError> {
    Ok(match path {
        Path::Raw | Path::Cpu(_) => copy_quantum(path.slot_bytes_per_block(format)),
        Path::Gpu(d) => {
            windows::plan(format, d.size() as u64, lim.max_binding, lim.align)?.step_blocks
        }
    })
}

pub(crate) fn plan(
    selected: &[(usize, &TensorInfo)],
    data_offsets: &[u64],
    paths: &[Path],
    lim: &Limits,
    staging_bytes: u64,
    slots: usize,
) -> crate::Result<Plan> {
    let slots = slots.max(2);
    // Parts.
    let mut tensors = Vec::with_capacity(selected.len());
    let mut min_slot = 4u64;
    let mut total_slot = 0u64;
    for (&(index, t), &path) in selected.iter().zip(paths) {
        let format = t.format;
        let n_blocks = t.n_bytes / format.block_bytes() as u64;
        let per = path.resident_bytes_per_block(format);
        let pad = path.buffer_pad();
        let step = part_step(format, lim.align);
        let fit = (lim.max_buffer.saturating_sub(pad) / per) / step * step;
        if fit == 0 && n_blocks > 0 {
            // Even the smallest part (one step of blocks, or the whole tensor when shorter)
            // does not fit the largest buffer: splitting cannot help.
            let n = step.min(n_blocks);
            let bytes = windows::round_up(n * per, pad);
            if bytes > lim.max_buffer {
                return Err(crate::gpu::GpuError::TooLarge {
                    what: format!("{:?} ({format}, {n} blocks per aligned part)", t.name),
                    bytes,
                    limit: lim.max_buffer,
                }
                .into());
            }
        }
        // Cut on whole rows where a run of them fits (the inference kernels bind whole rows):
        // the part step becomes a multiple of both the alignment step and the row's blocks.
        let row_blocks =
            (t.dims.first().copied().unwrap_or(1) / format.block_elems() as u64).max(1);
        let rows_step = step / windows::gcd(step, row_blocks) * row_blocks;
        let step = if rows_step <= fit { rows_step } else { step };
        let max_blocks = (fit / step * step).max(step);
        let mut parts = Vec::new();
        let mut first = 0;
        while first < n_blocks {
            let n = max_blocks.min(n_blocks - first);
            let data_bytes = n * per;
            parts.push(PartPlan {
                first_block: first,
                n_blocks: n,
                data_bytes,
                buffer_bytes: windows::round_up(data_bytes, pad).max(pad),
            });
            first += n;
        }
        let q = quantum(format, path, lim)?;
        let seg_align = if matches!(path, Path::Gpu(_)) {
            lim.align
        } else {
            4
        };
        min_slot = min_slot.max(windows::round_up(q * path.slot_bytes_per_block(format), 4));
        total_slot += windows::round_up(n_blocks * path.slot_bytes_per_block(format), seg_align);
        tensors.push(TensorPlan {
            index,
            format,
            path,
            shard: t.shard,
            file_offset: data_offsets.get(t.shard).copied().unwrap_or(0) + t.offset,
            parts,
        });
    }
    let mut want = (staging_bytes / slots as u64) & !3;
    if !tensors.iter().any(|t| matches!(t.path, Path::Gpu(_))) {
        want = want.min(COPY_SLOT_MAX);
    }
    let slot_bytes = want
        .min(windows::round_up(total_slot, 4))
        .max(min_slot)
        .min(lim.max_buffer & !3);
    // Stream in file order, shard by shard: sequential reads.
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| (tensors[i].shard, tensors[i].file_offset));

    let mut chunks = Vec::new();
    let mut chunk = Chunk::default();
    for &ti in &order {
        let t = &tensors[ti];
        let format = t.format;
        let bb = format.block_bytes() as u64;
        let per = t.path.slot_bytes_per_block(format);
        let q = quantum(format, t.path, lim)?;
        let is_gpu = matches!(t.path, Path::Gpu(_));
        let seg_align = if is_gpu { lim.align } else { 4 };
        let dst_per = t.path.resident_bytes_per_block(format);
        for (pi, part) in t.parts.iter().enumerate() {
            let mut done = 0u64;
            while done < part.n_blocks {
                let left = part.n_blocks - done;
                let start = windows::round_up(chunk.used, seg_align);
                let avail = slot_bytes.saturating_sub(start);
                let fit = avail / per;
                let n = if left <= fit { left } else { fit / q * q };
                if n == 0 {
                    if chunk.segments.is_empty() {
                        // Cannot happen: slot_bytes >= one quantum.
                        return Err(crate::gpu::GpuError::Invariant(format!(
                            "staging slot of {slot_bytes} bytes cannot hold {q} blocks of {format}"
                        ))
                        .into());
                    }
                    chunks.push(std::mem::take(&mut chunk));
                    continue;
                }
                let block = part.first_block + done;
                let slot_data = n * per;
                let slot_len = windows::round_up(slot_data, 4);
                chunk.segments.push(Segment {
                    tensor: ti,
                    part: pi,
                    shard: t.shard,
                    file_offset: t.file_offset + block * bb,
                    raw_len: n * bb,
                    slot_offset: start,
                    slot_data,
                    slot_len,
                    dst_offset: done * dst_per,
                    n_blocks: n,
                });
                chunk.used = start + slot_len;
                chunk.has_gpu |= is_gpu;
                done += n;
            }
        }
    }
    if !chunk.segments.is_empty() {
        chunks.push(chunk);
    }
    let any_gpu = tensors.iter().any(|t| matches!(t.path, Path::Gpu(_)));
    Ok(Plan {
        slots: slots.min(chunks.len().max(1)),
        tensors,
        chunks,
        slot_bytes,
        any_gpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, format: Format, n_blocks: u64, offset: u64) -> TensorInfo {
        TensorInfo {
            name: name.to_string(),
            dims: vec![n_blocks * format.block_elems() as u64],
            format,
            offset,
            n_elements: n_blocks * format.block_elems() as u64,
            n_bytes: n_blocks * format.block_bytes() as u64,
            shard: 0,
        }
    }

    /// Every block of every part is covered once, in order, and every segment fits its slot.
    fn check(plan: &Plan, infos: &[TensorInfo]) {
        let mut covered: Vec<Vec<u64>> = plan
            .tensors
            .iter()
            .map(|t| vec![0; t.parts.len()])
            .collect();
        for c in &plan.chunks {
            assert!(c.used <= plan.slot_bytes && c.used % 4 == 0);
            for s in &c.segments {
                let t = &plan.tensors[s.tensor];
                let part = &t.parts[s.part];
                let bb = t.format.block_bytes() as u64;
                assert_eq!(
                    s.file_offset,
                    t.file_offset + (part.first_block + covered[s.tensor][s.part]) * bb
                );
                assert_eq!(s.raw_len, s.n_blocks * bb);
                assert!(s.slot_offset + s.slot_len <= plan.slot_bytes);
                let dst_len = s.n_blocks * t.path.resident_bytes_per_block(t.format);
                assert!(s.dst_offset + dst_len <= part.buffer_bytes);
                covered[s.tensor][s.part] += s.n_blocks;
            }
        }
        for (t, c) in plan.tensors.iter().zip(&covered) {
            for (p, &n) in t.parts.iter().zip(c) {
                assert_eq!(p.n_blocks, n);
            }
            let total: u64 = t.parts.iter().map(|p| p.n_blocks).sum();
            let i = &infos[t.index];
            assert_eq!(total * t.format.block_bytes() as u64, i.n_bytes);
        }
    }

    #[test]
    fn small_slots_and_buffers_cover_every_block() {
        let infos = vec![
            info("a", Format::Q8_0, 1001, 0),
            info("b", Format::F32, 7, 34_048),
            info("c", Format::Q4_K, 40, 34_080),
            info("d", Format::Q4_0, 3, 40_000),
        ];
        let selected: Vec<_> = infos.iter().enumerate().collect();
        for paths in [
            vec![Path::Raw; 4],
            vec![
                Path::Gpu(DType::F16),
                Path::Gpu(DType::F32),
                Path::Cpu(DType::BF16),
                Path::Gpu(DType::F32),
            ],
        ] {
            for (align, max_buffer, staging) in [
                (4, 1 << 30, 1 << 20),
                (256, 20_000, 40_000),
                (64, 100_000, 8),
            ] {
                let lim = Limits {
                    align,
                    max_binding: 1 << 16,
                    max_buffer,
                };
                let p = plan(&selected, &[0], &paths, &lim, staging, 4).unwrap();
                check(&p, &infos);
                for c in &p.chunks {
                    for s in &c.segments {
                        if matches!(p.tensors[s.tensor].path, Path::Gpu(_)) {
                            assert_eq!(s.slot_offset % align, 0);
                            assert_eq!(s.dst_offset % align.max(16), 0);
                        }
                    }
                }
            }
        }
    }

    /// One aligned part bigger than the largest buffer cannot be split further: a typed error
    /// before anything is allocated (it used to plan a buffer past the limit).
    #[test]
    fn unsplittable_part_is_too_large() {
        let infos = [info("k", Format::Q4_K, 40, 0)];
        let selected: Vec<_> = infos.iter().enumerate().collect();
        let lim = Limits {
            align: 256,
            max_binding: 1 << 16,
            max_buffer: 8192,
        };
        let e = plan(&selected, &[0], &[Path::Gpu(DType::F32)], &lim, 1 << 20, 4).unwrap_err();
        assert!(
            matches!(
                e,
                crate::Error::Gpu(crate::gpu::GpuError::TooLarge {
                    bytes: 16384,
                    limit: 8192,
                    ..
                })
            ),
            "{e}"
        );
        // Raw, the same tensor splits into parts that fit.
        let p = plan(&selected, &[0], &[Path::Raw], &lim, 1 << 20, 4).unwrap();
        assert!(p.tensors[0].parts.iter().all(|x| x.buffer_bytes <= 8192));
    }
}

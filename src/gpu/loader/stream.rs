//! The streaming upload: a reader thread fills a ring of mapped staging buffers from the file (or
//! the memory map) while the calling thread submits the filled ones (copy, and dequantise on the
//! GPU) and re-maps them for reuse. At most `plan.slots` slots are in use, so host memory is
//! bounded by the staging budget whatever the model size.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use super::plan::{Chunk, Path, Plan};
use super::{Progress, Source};
use crate::gguf::Shard;
use crate::gpu::{buffers, scoped, DequantJob, GpuEngine, GpuError};
use crate::{Error, GgufFile, Result};

/// How long a blocked wait sleeps between checks of the other side.
const TICK: Duration = Duration::from_millis(5);

/// A staging slot handed back by its map callback: `Err` if mapping failed.
type Freed = (usize, std::result::Result<(), GpuError>);

/// What one load streams through.
pub(crate) struct Stream<'a> {
    pub engine: &'a GpuEngine,
    pub file: &'a GgufFile,
    pub source: Source,
    pub plan: &'a Plan,
    /// Resident buffers, `[tensor][part]`.
    pub buffers: &'a [Vec<Arc<wgpu::Buffer>>],
    /// `plan.slots` staging buffers (MAP_WRITE | COPY_SRC), mapped at creation.
    pub staging: &'a [wgpu::Buffer],
    /// `plan.slots` scratch buffers (STORAGE | COPY_DST) when the plan dequantises on the GPU.
    pub scratch: &'a [wgpu::Buffer],
    /// [`Source::DirectRead`]: an open handle of each shard.
    pub direct: Vec<File>,
    pub timeout: Duration,
    pub progress: Option<&'a Progress>,
}

impl Stream<'_> {
    /// Runs the whole plan; returns when the GPU has finished every submission.
    pub(crate) fn run(self) -> Result<()> {
        let Stream {
            engine,
            file,
            source,
            plan,
            buffers,
            staging,
            scratch,
            direct,
            timeout,
            progress,
        } = self;
        if plan.chunks.is_empty() {
            return Ok(());
        }
        let (free_tx, free_rx) = mpsc::channel::<Freed>();
        let (filled_tx, filled_rx) = mpsc::channel::<Result<usize>>();
        for slot in 0..staging.len() {
            let _ = free_tx.send((slot, Ok(())));
        }
        let cancel = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = Reader {
                file,
                source,
                plan,
                staging,
                pos: vec![None; direct.len()],
                direct,
                read_buf: Vec::new(),
                decode_buf: Vec::new(),
            };
            let cancel_ref = &cancel;
            s.spawn(move || reader.run(free_rx, filled_tx, cancel_ref));
            let out = submit_all(
                engine, plan, buffers, staging, scratch, &filled_rx, &free_tx, timeout, progress,
            );
            if out.is_err() {
                cancel.store(true, Ordering::Relaxed);
            }
            drop(filled_rx);
            out
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn submit_all(
    engine: &GpuEngine,
    plan: &Plan,
    buffers: &[Vec<Arc<wgpu::Buffer>>],
    staging: &[wgpu::Buffer],
    scratch: &[wgpu::Buffer],
    filled_rx: &Receiver<Result<usize>>,
    free_tx: &Sender<Freed>,
    timeout: Duration,
    progress: Option<&Progress>,
) -> Result<()> {
    let mut in_flight: VecDeque<wgpu::SubmissionIndex> = VecDeque::new();
    for chunk in &plan.chunks {
        let mut waited = Duration::ZERO;
        let slot = loop {
            match filled_rx.try_recv() {
                Ok(m) => break m?,
                Err(TryRecvError::Disconnected) => {
                    return Err(GpuError::Map("the staging reader stopped".into()).into())
                }
                Err(TryRecvError::Empty) => {}
            }
            // Nothing to submit yet: let the GPU finish the oldest submission (which frees its
            // slot for the reader), or wait for the reader.
            if let Some(index) = in_flight.pop_front() {
                engine.wait_for(index, timeout)?;
                continue;
            }
            match filled_rx.recv_timeout(TICK) {
                Ok(m) => break m?,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(GpuError::Map("the staging reader stopped".into()).into())
                }
                Err(RecvTimeoutError::Timeout) => {
                    // Map callbacks run inside polls: make sure they fire.
                    engine.poll();
                    engine.check_device()?;
                    waited += TICK;
                    if waited > timeout {
                        return Err(GpuError::Timeout(timeout).into());
                    }
                }
            }
        };
        let index = submit_chunk(engine, plan, chunk, buffers, staging, scratch, slot)?;
        in_flight.push_back(index);
        if let Some(p) = progress {
            p.report(chunk.segments.iter().map(|s| s.raw_len).sum());
        }
        let tx = free_tx.clone();
        buffers::map_for_write(&staging[slot], move |r| {
            let _ = tx.send((slot, r));
        });
    }
    if let Some(last) = in_flight.pop_back() {
        engine.wait_for(last, timeout)?;
    }
    engine.check_device()
}

fn submit_chunk(
    engine: &GpuEngine,
    plan: &Plan,
    chunk: &Chunk,
    buffers: &[Vec<Arc<wgpu::Buffer>>],
    staging: &[wgpu::Buffer],
    scratch: &[wgpu::Buffer],
    slot: usize,
) -> Result<wgpu::SubmissionIndex> {
    let device = engine.device();
    let stage = &staging[slot];
    stage.unmap();
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("gguf-dequant load"),
    });
    scoped(device, "recording staging copies", || {
        if chunk.has_gpu {
            encoder.copy_buffer_to_buffer(stage, 0, &scratch[slot], 0, chunk.used);
        }
        for seg in &chunk.segments {
            let t = &plan.tensors[seg.tensor];
            if !matches!(t.path, Path::Gpu(_)) {
                encoder.copy_buffer_to_buffer(
                    stage,
                    seg.slot_offset,
                    &buffers[seg.tensor][seg.part],
                    seg.dst_offset,
                    seg.slot_len,
                );
            }
        }
    })?;
    for seg in &chunk.segments {
        let t = &plan.tensors[seg.tensor];
        if let Path::Gpu(dtype) = t.path {
            engine.record(
                &mut encoder,
                &DequantJob {
                    format: t.format,
                    dtype,
                    src: &scratch[slot],
                    src_offset: seg.slot_offset,
                    n_blocks: seg.n_blocks,
                    dst: &buffers[seg.tensor][seg.part],
                    dst_offset: seg.dst_offset,
                },
            )?;
        }
    }
    Ok(engine.submit("submitting an upload", encoder)?)
}

/// The reader thread's state.
struct Reader<'a> {
    file: &'a GgufFile,
    source: Source,
    plan: &'a Plan,
    staging: &'a [wgpu::Buffer],
    direct: Vec<File>,
    /// [`Source::DirectRead`]: one segment's raw bytes (at most one slot).
    read_buf: Vec<u8>,
    /// CPU-decoded segments (at most one slot).
    decode_buf: Vec<u8>,
    /// Each direct handle's position, if known.
    pos: Vec<Option<u64>>,
}

fn grow(buf: &mut Vec<u8>, len: usize, what: &str) -> Result<()> {
    if buf.len() < len {
        buf.try_reserve_exact(len - buf.len())
            .map_err(|_| Error::OutOfMemory {
                bytes: len,
                what: what.to_string(),
            })?;
        buf.resize(len, 0);
    }
    Ok(())
}

impl Reader<'_> {
    fn run(
        mut self,
        free_rx: Receiver<Freed>,
        filled_tx: Sender<Result<usize>>,
        cancel: &AtomicBool,
    ) {
        for chunk in &self.plan.chunks {
            let slot = loop {
                if cancel.load(Ordering::Relaxed) {
                    return;
                }
                match free_rx.recv_timeout(TICK) {
                    Ok((slot, Ok(()))) => break slot,
                    Ok((_, Err(e))) => {
                        let _ = filled_tx.send(Err(e.into()));
                        return;
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            };
            let r = self.fill(chunk, slot);
            let failed = r.is_err();
            if filled_tx.send(r.map(|()| slot)).is_err() || failed {
                return;
            }
        }
    }

    /// Copies (reading, or decoding on the CPU) every segment of `chunk` into slot `slot`.
    fn fill(&mut self, chunk: &Chunk, slot: usize) -> Result<()> {
        let mut view = self.staging[slot]
            .get_mapped_range_mut(..)
            .map_err(|e| GpuError::Map(format!("staging buffer: {e}")))?;
        for seg in &chunk.segments {
            let t = &self.plan.tensors[seg.tensor];
            let shard = &self.file.shards()[seg.shard];
            let raw: &[u8] = match self.source {
                Source::Mmap => {
                    let range = usize::try_from(seg.file_offset)
                        .ok()
                        .and_then(|s| Some(s..s.checked_add(usize::try_from(seg.raw_len).ok()?)?));
                    match range.and_then(|r| shard.bytes().get(r)) {
                        Some(b) => b,
                        None => {
                            return Err(Error::FileChanged {
                                path: shard.path().to_path_buf(),
                                reason: "a tensor lies outside the mapped file".into(),
                            })
                        }
                    }
                }
                Source::DirectRead => {
                    let len = seg.raw_len as usize;
                    grow(&mut self.read_buf, len, "a direct-read buffer")?;
                    let (Some(handle), Some(pos)) =
                        (self.direct.get_mut(seg.shard), self.pos.get_mut(seg.shard))
                    else {
                        return Err(GpuError::InvalidJob(
                            "direct read without a file handle".into(),
                        )
                        .into());
                    };
                    read_at(
                        handle,
                        pos,
                        shard,
                        seg.file_offset,
                        &mut self.read_buf[..len],
                    )?;
                    &self.read_buf[..len]
                }
            };
            let so = seg.slot_offset as usize;
            let data = seg.slot_data as usize;
            let end = (seg.slot_offset + seg.slot_len) as usize;
            match t.path {
                Path::Raw | Path::Gpu(_) => view.slice(so..so + data).copy_from_slice(raw),
                Path::Cpu(dtype) => {
                    grow(&mut self.decode_buf, data, "a CPU-decode buffer")?;
                    let out = &mut self.decode_buf[..data];
                    crate::cpu::dequant_to_bytes(t.format, raw, dtype, out)?;
                    view.slice(so..so + data).copy_from_slice(out);
                }
            }
            if end > so + data {
                view.slice(so + data..end).fill(0);
            }
            if matches!(self.source, Source::Mmap) {
                // Copied: let the mapped pages go, so host memory stays bounded by the staging
                // ring rather than growing to the file size.
                shard.release(seg.file_offset, seg.raw_len);
            }
        }
        Ok(())
    }
}

/// Reads `buf.len()` bytes at `offset` of the direct handle.
fn read_at(
    f: &mut File,
    pos: &mut Option<u64>,
    shard: &Shard,
    offset: u64,
    buf: &mut [u8],
) -> Result<()> {
    let path = shard.path();
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    if *pos != Some(offset) {
        f.seek(SeekFrom::Start(offset)).map_err(io)?;
    }
    *pos = None;
    match f.read_exact(buf) {
        Ok(()) => {
            *pos = Some(offset + buf.len() as u64);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Error::FileChanged {
            path: path.to_path_buf(),
            reason: format!(
                "it ends before byte {} (it was {} bytes when opened)",
                offset + buf.len() as u64,
                shard.len()
            ),
        }),
        Err(e) => Err(io(e)),
    }
}

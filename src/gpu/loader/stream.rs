//! The streaming upload: reader threads fill a ring of mapped staging buffers from the file (or
//! the memory map) while the calling thread submits the filled ones (copy, and dequantise on the
//! GPU) and re-maps them for reuse. At most `plan.slots` slots are in use, so host memory is
//! bounded by the staging budget whatever the model size.
//!
//! Chunks are independent (each writes its own ranges of the resident buffers), so readers take
//! them in file order from a shared counter, each into whatever slot is free, and the submitter
//! submits them in the order they are filled.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::plan::{Chunk, Path, Plan, Segment};
use super::Progress;
use crate::gguf::Shard;
use crate::gpu::{buffers, scoped, DequantJob, GpuEngine, GpuError};
use crate::{Error, GgufFile, Result};

/// The name of the loader's reader threads (at most 15 bytes, so that `/proc/<pid>/task/*/comm`
/// and profilers show all of it).
pub const READER_THREAD: &str = "gguf-dequant-rd";

/// How long a blocked wait sleeps between checks of the other side.
const TICK: Duration = Duration::from_millis(5);

/// `O_DIRECT` offsets, lengths and buffer addresses are multiples of this (the largest logical
/// block size of common disks).
pub(crate) const DIRECT_ALIGN: u64 = 4096;

/// Bytes one `O_DIRECT` read asks for at most (the bounce buffer of each reader).
const DIRECT_PIECE: u64 = 4 << 20;

/// A staging slot handed back by its map callback: `Err` if mapping failed.
type Freed = (usize, std::result::Result<(), GpuError>);

/// A filled slot: the chunk's index in the plan and the slot.
type Filled = Result<(usize, usize)>;

/// Where the readers take the bytes from.
pub(crate) enum Input<'a> {
    /// Each shard's memory map; pages are released behind the reader.
    Map(&'a GgufFile),
    /// `pread` on a handle of each shard, straight into the mapped slot.
    Read(&'a GgufFile, Vec<File>),
    /// `O_DIRECT` reads of each shard (aligned, through a bounce buffer per reader).
    Direct(&'a GgufFile, Vec<File>),
    /// Host memory (the host-to-device roofline): segment offsets index the slice.
    Memory(&'a [u8]),
}

/// What one load streams through.
pub(crate) struct Stream<'a> {
    pub engine: &'a GpuEngine,
    pub input: Input<'a>,
    pub plan: &'a Plan,
    /// Resident buffers, `[tensor][part]`.
    pub buffers: &'a [Vec<Arc<wgpu::Buffer>>],
    /// `plan.slots` staging buffers (MAP_WRITE | COPY_SRC), mapped at creation.
    pub staging: &'a [wgpu::Buffer],
    /// `plan.slots` scratch buffers (STORAGE | COPY_DST) when the plan dequantises on the GPU.
    pub scratch: &'a [wgpu::Buffer],
    /// Reader threads to start (at least 1, at most one per slot and one per chunk).
    pub readers: usize,
    pub timeout: Duration,
    pub progress: Option<&'a Progress>,
}

/// What the readers share.
struct Shared {
    free_rx: Mutex<Receiver<Freed>>,
    /// The next chunk to fill.
    next: AtomicUsize,
    cancel: AtomicBool,
}

impl Stream<'_> {
    /// Runs the whole plan; returns (the reader threads it ran) when the GPU has finished every
    /// submission and every reader thread has ended.
    pub(crate) fn run(self) -> Result<usize> {
        let Stream {
            engine,
            input,
            plan,
            buffers,
            staging,
            scratch,
            readers,
            timeout,
            progress,
        } = self;
        if plan.chunks.is_empty() {
            return Ok(0);
        }
        let (free_tx, free_rx) = mpsc::channel::<Freed>();
        let (filled_tx, filled_rx) = mpsc::channel::<Filled>();
        for slot in 0..staging.len() {
            let _ = free_tx.send((slot, Ok(())));
        }
        let shared = Shared {
            free_rx: Mutex::new(free_rx),
            next: AtomicUsize::new(0),
            cancel: AtomicBool::new(false),
        };
        let readers = readers
            .clamp(1, staging.len().max(1))
            .min(plan.chunks.len());
        std::thread::scope(|s| {
            let mut started = Vec::with_capacity(readers);
            for _ in 0..readers {
                let reader = Reader {
                    input: &input,
                    plan,
                    staging,
                    bounce: Vec::new(),
                    read_buf: Vec::new(),
                    decode_buf: Vec::new(),
                };
                let (shared, tx) = (&shared, filled_tx.clone());
                let spawned = std::thread::Builder::new()
                    .name(READER_THREAD.into())
                    .spawn_scoped(s, move || reader.run(shared, tx));
                match spawned {
                    Ok(handle) => started.push(handle),
                    // Fewer readers only make the load slower; none leaves nothing to read.
                    Err(e) if started.is_empty() => {
                        return Err(Error::OutOfMemory {
                            bytes: 0,
                            what: format!("starting a staging reader thread: {e}"),
                        })
                    }
                    Err(_) => break,
                }
            }
            drop(filled_tx);
            let mut in_flight = VecDeque::new();
            let out = submit_all(
                engine,
                plan,
                buffers,
                staging,
                scratch,
                &filled_rx,
                &free_tx,
                timeout,
                progress,
                &mut in_flight,
            );
            if out.is_err() {
                shared.cancel.store(true, Ordering::Relaxed);
                // Let what was submitted finish (or fail) before the buffers go, so that a lost
                // device is known as lost by the time the error is reported.
                if let Some(last) = in_flight.pop_back() {
                    let _ = engine.wait_for(last, timeout);
                }
            }
            drop(filled_rx);
            // Joined, not only finished: no reader thread is left when the load returns.
            let ran = started.len();
            for handle in started {
                if let Err(panic) = handle.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            out.map(|()| ran)
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
    filled_rx: &Receiver<Filled>,
    free_tx: &Sender<Freed>,
    timeout: Duration,
    progress: Option<&Progress>,
    in_flight: &mut VecDeque<wgpu::SubmissionIndex>,
) -> Result<()> {
    let stopped = || -> Error {
        GpuError::Invariant("the staging readers stopped before sending every chunk".into()).into()
    };
    for _ in 0..plan.chunks.len() {
        let mut waited = Duration::ZERO;
        let (index, slot) = loop {
            match filled_rx.try_recv() {
                Ok(m) => break m?,
                Err(TryRecvError::Disconnected) => return Err(stopped()),
                Err(TryRecvError::Empty) => {}
            }
            // Nothing to submit yet: let the GPU finish the oldest submission (which frees its
            // slot for a reader), or wait for the readers.
            if let Some(index) = in_flight.pop_front() {
                engine.wait_for(index, timeout)?;
                continue;
            }
            match filled_rx.recv_timeout(TICK) {
                Ok(m) => break m?,
                Err(RecvTimeoutError::Disconnected) => return Err(stopped()),
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
        let chunk = &plan.chunks[index];
        let submission = submit_chunk(engine, plan, chunk, buffers, staging, scratch, slot)?;
        in_flight.push_back(submission);
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

/// One reader thread's state.
struct Reader<'a> {
    input: &'a Input<'a>,
    plan: &'a Plan,
    staging: &'a [wgpu::Buffer],
    /// [`Input::Direct`]: the aligned bounce buffer (at most [`DIRECT_PIECE`] plus alignment).
    bounce: Vec<u8>,
    /// A CPU-decoded segment's raw bytes when they are read rather than mapped (at most one slot).
    read_buf: Vec<u8>,
    /// CPU-decoded segments (at most one slot).
    decode_buf: Vec<u8>,
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

fn ends_early(shard: &Shard, end: u64) -> Error {
    Error::FileChanged {
        path: shard.path().to_path_buf(),
        reason: format!(
            "it ends before byte {end} (it was {} bytes when opened)",
            shard.len()
        ),
    }
}

impl Reader<'_> {
    fn run(mut self, shared: &Shared, filled_tx: Sender<Filled>) {
        loop {
            let slot = loop {
                if shared.cancel.load(Ordering::Relaxed) {
                    return;
                }
                let got = shared
                    .free_rx
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .recv_timeout(TICK);
                match got {
                    Ok((slot, Ok(()))) => break slot,
                    Ok((_, Err(e))) => {
                        let _ = filled_tx.send(Err(e.into()));
                        return;
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            };
            let index = shared.next.fetch_add(1, Ordering::Relaxed);
            let Some(chunk) = self.plan.chunks.get(index) else {
                return;
            };
            let r = self.fill(chunk, slot);
            let failed = r.is_err();
            if filled_tx.send(r.map(|()| (index, slot))).is_err() || failed {
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
            let so = seg.slot_offset as usize;
            let data = seg.slot_data as usize;
            let end = (seg.slot_offset + seg.slot_len) as usize;
            match t.path {
                Path::Raw | Path::Gpu(_) => self.read_into(seg, view.slice(so..so + data))?,
                Path::Cpu(dtype) => {
                    grow(&mut self.decode_buf, data, "a CPU-decode buffer")?;
                    let raw = raw(self.input, &mut self.bounce, &mut self.read_buf, seg)?;
                    let out = &mut self.decode_buf[..data];
                    crate::cpu::dequant_to_bytes(t.format, raw, dtype, out)?;
                    view.slice(so..so + data).copy_from_slice(out);
                }
            }
            if end > so + data {
                view.slice(so + data..end).fill(0);
            }
            if let Input::Map(file) = self.input {
                // Copied: let the mapped pages go, so host memory stays bounded by the staging
                // ring rather than growing to the file size.
                file.shards()[seg.shard].release(seg.file_offset, seg.raw_len);
            }
        }
        Ok(())
    }

    /// Puts the raw bytes of `seg` into `dst` (exactly `seg.raw_len` bytes).
    fn read_into(&mut self, seg: &Segment, mut dst: wgpu::WriteOnly<'_, [u8]>) -> Result<()> {
        match self.input {
            Input::Map(file) => {
                let shard = &file.shards()[seg.shard];
                let raw = mapped(shard.bytes(), seg).ok_or_else(|| outside_map(shard))?;
                dst.copy_from_slice(raw);
                Ok(())
            }
            Input::Memory(bytes) => {
                let raw = mapped(bytes, seg).ok_or_else(|| {
                    GpuError::Invariant("a segment outside the host source".into())
                })?;
                dst.copy_from_slice(raw);
                Ok(())
            }
            Input::Read(file, files) => {
                let shard = &file.shards()[seg.shard];
                let f = handle(files, seg)?;
                crate::gguf::read_exact_at_into(f, seg.file_offset, dst).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        ends_early(shard, seg.file_offset + seg.raw_len)
                    } else {
                        Error::Io {
                            path: shard.path().to_path_buf(),
                            source: e,
                        }
                    }
                })
            }
            Input::Direct(file, files) => {
                let shard = &file.shards()[seg.shard];
                let f = handle(files, seg)?;
                direct_read(f, shard, &mut self.bounce, seg, |at, bytes| {
                    dst.slice(at..at + bytes.len()).copy_from_slice(bytes)
                })
            }
        }
    }
}

/// The mapped bytes of `seg`, or where the segment lies outside the map.
fn mapped<'m>(bytes: &'m [u8], seg: &Segment) -> Option<&'m [u8]> {
    let start = usize::try_from(seg.file_offset).ok()?;
    bytes.get(start..start.checked_add(usize::try_from(seg.raw_len).ok()?)?)
}

fn outside_map(shard: &Shard) -> Error {
    Error::FileChanged {
        path: shard.path().to_path_buf(),
        reason: "a tensor lies outside the mapped file".into(),
    }
}

fn handle<'f>(files: &'f [File], seg: &Segment) -> Result<&'f File> {
    files
        .get(seg.shard)
        .ok_or_else(|| GpuError::Invariant("a direct read without a file handle".into()).into())
}

/// The raw bytes of `seg` as a slice: mapped, or read into `read_buf`.
fn raw<'s>(
    input: &'s Input<'s>,
    bounce: &mut Vec<u8>,
    read_buf: &'s mut Vec<u8>,
    seg: &Segment,
) -> Result<&'s [u8]> {
    let len = seg.raw_len as usize;
    match input {
        Input::Map(file) => {
            let shard = &file.shards()[seg.shard];
            mapped(shard.bytes(), seg).ok_or_else(|| outside_map(shard))
        }
        Input::Memory(bytes) => mapped(bytes, seg)
            .ok_or_else(|| GpuError::Invariant("a segment outside the host source".into()).into()),
        Input::Read(file, files) => {
            let shard = &file.shards()[seg.shard];
            let f = handle(files, seg)?;
            grow(read_buf, len, "a read buffer")?;
            read_exact_at(f, shard, seg.file_offset, &mut read_buf[..len])?;
            Ok(&read_buf[..len])
        }
        Input::Direct(file, files) => {
            let shard = &file.shards()[seg.shard];
            let f = handle(files, seg)?;
            grow(read_buf, len, "a read buffer")?;
            let out = read_buf;
            direct_read(f, shard, bounce, seg, |at, bytes| {
                out[at..at + bytes.len()].copy_from_slice(bytes)
            })?;
            Ok(&out[..len])
        }
    }
}

/// Reads `buf.len()` bytes at `offset` of the shard's handle.
fn read_exact_at(f: &File, shard: &Shard, offset: u64, buf: &mut [u8]) -> Result<()> {
    #[cfg(unix)]
    let r = std::os::unix::fs::FileExt::read_exact_at(f, buf, offset);
    #[cfg(not(unix))]
    let r = {
        use std::io::{Read, Seek};
        let mut f = f;
        f.seek(std::io::SeekFrom::Start(offset))
            .and_then(|_| f.read_exact(buf))
    };
    r.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ends_early(shard, offset + buf.len() as u64)
        } else {
            Error::Io {
                path: shard.path().to_path_buf(),
                source: e,
            }
        }
    })
}

/// Reads the raw bytes of `seg` with aligned `O_DIRECT` reads of at most [`DIRECT_PIECE`]
/// bytes, handing each piece to `sink` with its offset in the segment.
fn direct_read(
    f: &File,
    shard: &Shard,
    bounce: &mut Vec<u8>,
    seg: &Segment,
    mut sink: impl FnMut(usize, &[u8]),
) -> Result<()> {
    let io = |source| Error::Io {
        path: shard.path().to_path_buf(),
        source,
    };
    let align = DIRECT_ALIGN as usize;
    grow(bounce, DIRECT_PIECE as usize + align, "an O_DIRECT buffer")?;
    let lead = bounce.as_ptr().align_offset(align).min(align);
    let buf = &mut bounce[lead..lead + DIRECT_PIECE as usize];
    let end = seg.file_offset + seg.raw_len;
    let mut pos = seg.file_offset;
    while pos < end {
        let start = pos / DIRECT_ALIGN * DIRECT_ALIGN;
        let want = (end - start)
            .next_multiple_of(DIRECT_ALIGN)
            .min(DIRECT_PIECE) as usize;
        let mut got = 0;
        while got < want {
            #[cfg(unix)]
            let r = std::os::unix::fs::FileExt::read_at(f, &mut buf[got..want], start + got as u64);
            #[cfg(not(unix))]
            let r: std::io::Result<usize> = Err(std::io::ErrorKind::Unsupported.into());
            match r {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(super::freshness::direct_refused(e))),
            }
            if !(got as u64).is_multiple_of(DIRECT_ALIGN) {
                // A short read off the block grid only happens at the end of the file.
                break;
            }
        }
        let skip = (pos - start) as usize;
        let usable = (start + got as u64).min(end);
        if usable <= pos {
            return Err(ends_early(shard, end));
        }
        let take = (usable - pos) as usize;
        sink((pos - seg.file_offset) as usize, &buf[skip..skip + take]);
        pos += take as u64;
    }
    Ok(())
}

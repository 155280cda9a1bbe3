//! [`Recorder`]: kernels recorded into a caller's compute pass, step after step, without new
//! wgpu objects once warm.
//!
//! * **Parameters.** Each dispatch's `Params` are appended to the recording's bytes at the
//!   device's uniform offset alignment and bound from one uniform buffer with a dynamic offset
//!   (group 1). [`Recorder::finish`] writes them with `Queue::write_buffer`, which wgpu applies
//!   at the start of the next submission; a recording that outgrows the buffer continues in a
//!   new one, and the next recording starts in a buffer that holds the whole of it.
//! * **Bind groups** (group 0) are cached by layout and (buffer, offset, size) of every
//!   binding: a tensor part's run of rows, an operand's span. An entry unused for
//!   [`RETAIN_RECORDINGS`] recordings is dropped (and with it its hold on the buffers).
//! * **Layouts and pipelines** are the engine's, made once per device.
//!
//! A warm step, one that records the same kernels on the same buffers as one before it, creates
//! no wgpu object: [`RecorderStats`] counts what was created. How each of our kernels' calls
//! becomes dispatches is in `dispatch.rs`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::binding;
use super::layout::{KernelSet, Layout, Program};
use super::params::MAX_PARAMS_BYTES;
use super::plan::{invalid, Span};
use crate::gpu::{buffers, scoped, GpuError};
use crate::Result;

/// Recordings a cached bind group survives without being used.
pub const RETAIN_RECORDINGS: u64 = 16;
/// Bytes of the first uniform buffer of a recorder.
const FIRST_UNIFORM_BYTES: u64 = 4 << 10;
/// Group-0 bindings a kernel may have.
const MAX_BINDINGS: usize = 8;

/// What a [`Recorder`] has done and created since it was made; subtract two readings
/// ([`RecorderStats::since`]) for one step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Recordings finished.
    pub recordings: u64,
    /// Dispatches recorded.
    pub dispatches: u64,
    /// Bind groups created (cache misses, and one per uniform buffer).
    pub bind_groups_created: u64,
    /// Dispatches whose storage bind group came from the cache.
    pub bind_groups_reused: u64,
    /// Uniform buffers created.
    pub buffers_created: u64,
    /// Compute pipelines the engine has compiled for its kernels (engine-wide).
    pub pipelines_created: u64,
    /// Bind-group and pipeline layouts the engine has made for its kernels (engine-wide).
    pub layouts_created: u64,
}

impl RecorderStats {
    /// Every wgpu object counted: bind groups, buffers, pipelines and layouts.
    pub fn objects_created(&self) -> u64 {
        self.bind_groups_created
            + self.buffers_created
            + self.pipelines_created
            + self.layouts_created
    }

    /// The counts since `earlier`, a reading of the same recorder.
    pub fn since(&self, earlier: &RecorderStats) -> RecorderStats {
        RecorderStats {
            recordings: self.recordings - earlier.recordings,
            dispatches: self.dispatches - earlier.dispatches,
            bind_groups_created: self.bind_groups_created - earlier.bind_groups_created,
            bind_groups_reused: self.bind_groups_reused - earlier.bind_groups_reused,
            buffers_created: self.buffers_created - earlier.buffers_created,
            pipelines_created: self.pipelines_created - earlier.pipelines_created,
            layouts_created: self.layouts_created - earlier.layouts_created,
        }
    }
}

/// One uniform buffer and its params bind group.
struct Uniform {
    buffer: wgpu::Buffer,
    group: wgpu::BindGroup,
}

/// A storage binding: a buffer run.
#[derive(Clone, Copy)]
pub(super) struct Bind<'a> {
    pub(super) buffer: &'a wgpu::Buffer,
    pub(super) offset: u64,
    pub(super) size: u64,
}

impl<'a> Bind<'a> {
    pub(super) fn span(buffer: &'a wgpu::Buffer, s: Span) -> Bind<'a> {
        Bind {
            buffer,
            offset: s.offset,
            size: s.size,
        }
    }
}

/// The cache key of a storage bind group.
#[derive(Clone, PartialEq, Eq, Hash)]
struct BindKey {
    layout: u64,
    entries: [Option<(wgpu::Buffer, u64, u64)>; MAX_BINDINGS],
}

struct Cached {
    group: wgpu::BindGroup,
    used: u64,
}

/// Records kernels into a caller's compute pass; keep one per stream of steps (see the module
/// docs). Made by `GpuEngine::recorder`.
///
/// ```no_run
/// # use gguf_dequant::gpu::{GpuEngine, kernels::{MulMatJob, Operand}};
/// # fn step(engine: &GpuEngine, jobs: &[MulMatJob<'_>]) -> gguf_dequant::Result<()> {
/// let mut recorder = engine.recorder();
/// for _token in 0..32 {
///     let mut encoder = engine.device().create_command_encoder(&Default::default());
///     {
///         let mut pass = encoder.begin_compute_pass(&Default::default());
///         for job in jobs {
///             recorder.matvec(&mut pass, job)?;
///         }
///     }
///     recorder.finish(); // writes this recording's parameters
///     engine.queue().submit([encoder.finish()]);
/// }
/// # Ok(()) }
/// ```
///
/// One recording at a time: call [`Recorder::finish`], then submit, before recording the next
/// step with the same recorder (finish overwrites the uniform buffer the previous step reads,
/// ordered after it by the queue).
pub struct Recorder {
    pub(super) set: Arc<KernelSet>,
    uniform: Option<Uniform>,
    /// Bytes the current uniform buffer holds (dynamic offsets up to `capacity - 256`).
    capacity: u64,
    /// Buffers this recording outgrew, with their bytes, written at finish.
    retired: Vec<(Uniform, Vec<u8>)>,
    bytes: Vec<u8>,
    /// Bytes of every buffer of this recording.
    total: u64,
    cache: HashMap<BindKey, Cached>,
    /// The integer matvec path's x codes and scales (grown on demand, reused from call to call).
    scratch: Option<wgpu::Buffer>,
    stats: RecorderStats,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("stats", &self.stats())
            .field("cached_bind_groups", &self.cache.len())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    pub(crate) fn new(set: Arc<KernelSet>) -> Recorder {
        Recorder {
            set,
            uniform: None,
            capacity: 0,
            retired: Vec::new(),
            bytes: Vec::new(),
            total: 0,
            cache: HashMap::new(),
            scratch: None,
            stats: RecorderStats::default(),
        }
    }

    /// What it has recorded and created so far.
    pub fn stats(&self) -> RecorderStats {
        RecorderStats {
            pipelines_created: self.set.created.pipelines.load(Ordering::Relaxed),
            layouts_created: self.set.created.layouts.load(Ordering::Relaxed),
            ..self.stats
        }
    }

    /// Ends the recording: writes its parameters to its uniform buffers (`Queue::write_buffer`:
    /// applied at the start of the next submission, so submit the recorded commands after this)
    /// and drops cached bind groups unused for [`RETAIN_RECORDINGS`] recordings.
    pub fn finish(&mut self) {
        let queue = &self.set.queue;
        for (u, bytes) in self.retired.drain(..) {
            queue.write_buffer(&u.buffer, 0, &bytes);
        }
        if let Some(u) = &self.uniform {
            if !self.bytes.is_empty() {
                queue.write_buffer(&u.buffer, 0, &self.bytes);
            }
        }
        // A recording that outgrew its buffer: the next one starts in one that holds it all.
        if self.total > self.capacity {
            self.uniform = None;
            self.capacity = (self.total + MAX_PARAMS_BYTES as u64).next_power_of_two();
        }
        self.bytes.clear();
        self.total = 0;
        // `used` is the index of the recording that last used an entry; the recordings since
        // then are `now - 1 - used`.
        self.stats.recordings += 1;
        let now = self.stats.recordings;
        self.cache
            .retain(|_, c| now - 1 - c.used <= RETAIN_RECORDINGS);
    }

    /// Drops every cached bind group (and its hold on the buffers it binds).
    pub fn clear_cache(&mut self) {
        self.cache.clear();
    }

    /// The integer matvec path's scratch buffer, at least `bytes` long: the recorder's own,
    /// replaced by one of the next power of two (at least 64 KiB, at most a storage binding) when a call needs more. Calls
    /// recorded one after the other may share it: wgpu orders each dispatch's writes after the
    /// reads of the dispatches before it.
    pub(super) fn scratch(&mut self, bytes: u64) -> Result<wgpu::Buffer> {
        if let Some(b) = self.scratch.as_ref().filter(|b| b.size() >= bytes) {
            return Ok(b.clone());
        }
        let size = bytes
            .next_power_of_two()
            .max(64 << 10)
            .min(self.set.plan.max_binding)
            .max(bytes);
        let buffer = buffers::create(
            &self.set.device,
            "gguf-dequant int8 x",
            size,
            wgpu::BufferUsages::STORAGE,
            false,
        )?;
        self.stats.buffers_created += 1;
        self.set.created.buffers.fetch_add(1, Ordering::Relaxed);
        self.scratch = Some(buffer.clone());
        Ok(buffer)
    }

    /// A uniform buffer of `capacity` bytes and its bind group.
    fn new_uniform(&mut self, capacity: u64) -> Result<Uniform> {
        let device = &self.set.device;
        let buffer = buffers::create(
            device,
            "gguf-dequant kernel params",
            capacity,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            false,
        )?;
        let group = scoped(device, "binding the kernel params", || {
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("gguf-dequant kernel params"),
                layout: &self.set.params_layout,
                entries: &[wgpu::BindGroupEntry {
                    binding: binding::PARAMS,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &buffer,
                        offset: 0,
                        size: wgpu::BufferSize::new(MAX_PARAMS_BYTES as u64),
                    }),
                }],
            })
        })?;
        self.stats.buffers_created += 1;
        self.stats.bind_groups_created += 1;
        self.set.created.buffers.fetch_add(1, Ordering::Relaxed);
        self.set.created.bind_groups.fetch_add(1, Ordering::Relaxed);
        Ok(Uniform { buffer, group })
    }

    /// Appends `params` and returns its dynamic offset in the current uniform buffer.
    fn push_params(&mut self, params: &[u8]) -> Result<u32> {
        if params.len() > MAX_PARAMS_BYTES || !params.len().is_multiple_of(4) {
            return Err(invalid(format!(
                "kernel params of {} bytes: at most {MAX_PARAMS_BYTES}, a multiple of 4",
                params.len()
            )));
        }
        let align = self.set.plan.uniform_align.max(4) as usize;
        let mut offset = self.bytes.len().next_multiple_of(align) as u64;
        if self.uniform.is_none() || offset + MAX_PARAMS_BYTES as u64 > self.capacity {
            let capacity = if self.uniform.is_none() {
                self.capacity.max(FIRST_UNIFORM_BYTES)
            } else {
                2 * self.capacity
            };
            let fresh = self.new_uniform(capacity)?;
            if let Some(old) = self.uniform.replace(fresh) {
                self.retired.push((old, std::mem::take(&mut self.bytes)));
            }
            self.capacity = capacity;
            offset = 0;
        }
        self.total += offset - self.bytes.len() as u64 + params.len() as u64;
        self.bytes.resize(offset as usize, 0);
        self.bytes.extend_from_slice(params);
        u32::try_from(offset).map_err(|_| invalid("kernel params past 4 GiB".into()))
    }

    /// The cached storage bind group of `binds` on `layout`, or a new one.
    fn bind_group(&mut self, layout: &Layout, binds: &[Bind<'_>]) -> Result<BindKey> {
        let mut entries: [Option<(wgpu::Buffer, u64, u64)>; MAX_BINDINGS] = Default::default();
        for (e, b) in entries.iter_mut().zip(binds) {
            *e = Some((b.buffer.clone(), b.offset, b.size));
        }
        let key = BindKey {
            layout: layout.id,
            entries,
        };
        let now = self.stats.recordings;
        if let Some(c) = self.cache.get_mut(&key) {
            c.used = now;
            self.stats.bind_groups_reused += 1;
            return Ok(key);
        }
        let device = &self.set.device;
        let group = scoped(device, "binding a kernel's buffers", || {
            let entries: Vec<wgpu::BindGroupEntry<'_>> = layout
                .bindings
                .iter()
                .zip(binds)
                .map(|(&(binding, _), b)| wgpu::BindGroupEntry {
                    binding,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: b.buffer,
                        offset: b.offset,
                        size: wgpu::BufferSize::new(b.size),
                    }),
                })
                .collect();
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("gguf-dequant kernel"),
                layout: &layout.group,
                entries: &entries,
            })
        })?;
        self.stats.bind_groups_created += 1;
        self.set.created.bind_groups.fetch_add(1, Ordering::Relaxed);
        self.cache.insert(key.clone(), Cached { group, used: now });
        Ok(key)
    }

    /// One dispatch: params, bind groups, pipeline, grid.
    pub(super) fn record(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        pipeline: &wgpu::ComputePipeline,
        layout: &Layout,
        binds: &[Bind<'_>],
        params: &[u8],
        groups: (u32, u32, u32),
    ) -> Result<()> {
        if binds.len() != layout.bindings.len() {
            return Err(invalid(format!(
                "{} buffers for a kernel of {} bindings",
                binds.len(),
                layout.bindings.len()
            )));
        }
        let offset = self.push_params(params)?;
        let key = self.bind_group(layout, binds)?;
        let invariant = |m: &str| -> crate::Error { GpuError::Invariant(m.into()).into() };
        let storage = &self
            .cache
            .get(&key)
            .ok_or_else(|| invariant("no cached bind group"))?
            .group;
        let uniform = &self
            .uniform
            .as_ref()
            .ok_or_else(|| invariant("no uniform buffer"))?
            .group;
        pass.set_pipeline(pipeline);
        pass.set_bind_group(binding::STORAGE_GROUP, storage, &[]);
        pass.set_bind_group(binding::PARAMS_GROUP, uniform, &[offset]);
        pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        self.stats.dispatches += 1;
        Ok(())
    }

    /// Records an engine's own kernel: `params` in group 1, `buffers` bound to
    /// [`Program::bindings`] in their order (each a run of a `STORAGE` buffer from an offset that
    /// is a multiple of the device's `min_storage_buffer_offset_alignment`; `size: None` for the
    /// rest of the buffer), `workgroups` its grid.
    pub fn dispatch<P: bytemuck::Pod>(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        program: &Program,
        params: &P,
        buffers: &[wgpu::BufferBinding<'_>],
        workgroups: [u32; 3],
    ) -> Result<()> {
        self.set.check()?;
        if !Arc::ptr_eq(&program.owner, &self.set) {
            return Err(invalid(
                "the program was made for another engine's device".into(),
            ));
        }
        if buffers.len() > MAX_BINDINGS {
            return Err(invalid(format!(
                "{} buffers: a program binds at most {MAX_BINDINGS}",
                buffers.len()
            )));
        }
        let align = self.set.plan.align;
        let mut binds = Vec::with_capacity(buffers.len());
        for (i, b) in buffers.iter().enumerate() {
            let len = b.buffer.size();
            let size = b.size.map_or(len.saturating_sub(b.offset), |s| s.get());
            if !b.offset.is_multiple_of(align) || b.offset.saturating_add(size) > len || size == 0 {
                return Err(invalid(format!(
                    "program buffer {i}: {size} bytes from {} in a buffer of {len} (offsets are multiples of {align})",
                    b.offset
                )));
            }
            if !b.buffer.usage().contains(wgpu::BufferUsages::STORAGE) {
                return Err(invalid(format!(
                    "program buffer {i}: the buffer needs usage STORAGE"
                )));
            }
            binds.push(Bind {
                buffer: b.buffer,
                offset: b.offset,
                size,
            });
        }
        let [x, y, z] = workgroups;
        self.record(
            pass,
            &program.pipeline,
            &program.layout,
            &binds,
            bytemuck::bytes_of(params),
            (x, y, z),
        )
    }
}

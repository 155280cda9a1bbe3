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
//! no wgpu object: [`RecorderStats`] counts what was created.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::layout::{KernelSet, Layout, Program};
use super::params::{GetRowsParams, MatMulParams, MatVecParams, MAX_PARAMS_BYTES};
use super::plan::{invalid, row_runs, shape, span, Span};
use super::{
    binding, GetRowsJob, KernelKey, MatVecIdJob, MulMatJob, GET_ROWS_VALUES, MATMUL_CPU_COLUMNS,
    MATMUL_TILE, MATVEC_MAX_BATCH, WORKGROUP_SIZE,
};
use crate::gpu::{buffers, scoped, windows, GpuError};
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
struct Bind<'a> {
    buffer: &'a wgpu::Buffer,
    offset: u64,
    size: u64,
}

impl<'a> Bind<'a> {
    fn span(buffer: &'a wgpu::Buffer, s: Span) -> Bind<'a> {
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
    set: Arc<KernelSet>,
    uniform: Option<Uniform>,
    /// Bytes the current uniform buffer holds (dynamic offsets up to `capacity - 256`).
    capacity: u64,
    /// Buffers this recording outgrew, with their bytes, written at finish.
    retired: Vec<(Uniform, Vec<u8>)>,
    bytes: Vec<u8>,
    /// Bytes of every buffer of this recording.
    total: u64,
    cache: HashMap<BindKey, Cached>,
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
        self.stats.recordings += 1;
        let now = self.stats.recordings;
        self.cache.retain(|_, c| now - c.used <= RETAIN_RECORDINGS);
    }

    /// Drops every cached bind group (and its hold on the buffers it binds).
    pub fn clear_cache(&mut self) {
        self.cache.clear();
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
        self.cache.insert(key.clone(), Cached { group, used: now });
        Ok(key)
    }

    /// One dispatch: params, bind groups, pipeline, grid.
    fn record(
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
        let storage = &self.cache[&key].group;
        let uniform = &self.uniform.as_ref().expect("push_params made it").group;
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

    /// Records `Y = W X` for 1 to [`MATVEC_MAX_BATCH`] columns.
    pub fn matvec(&mut self, pass: &mut wgpu::ComputePass<'_>, job: &MulMatJob<'_>) -> Result<()> {
        if job.batch == 0 || job.batch > MATVEC_MAX_BATCH {
            return Err(invalid(format!(
                "matvec takes 1 to {MATVEC_MAX_BATCH} columns, not {} (use matmul)",
                job.batch
            )));
        }
        self.mul(pass, job, false, MATVEC_MAX_BATCH as u64)
    }

    /// Records `Y = W X` for any number of columns: tiled through workgroup memory, or on CPU
    /// adapters (one invocation per matvec row) as matvecs of up to [`MATMUL_CPU_COLUMNS`]
    /// columns, one invocation per row decoding each chunk once for all of them (measured faster
    /// there: no barriers, no workgroup-memory round trip).
    pub fn matmul(&mut self, pass: &mut wgpu::ComputePass<'_>, job: &MulMatJob<'_>) -> Result<()> {
        if job.batch == 0 {
            return Err(invalid("matmul needs at least one column".into()));
        }
        if self.set.plan.threads == 1 {
            self.mul(pass, job, false, MATMUL_CPU_COLUMNS as u64)
        } else {
            self.mul(pass, job, true, 0)
        }
    }

    fn mul(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        job: &MulMatJob<'_>,
        tiled: bool,
        matvec_cols: u64,
    ) -> Result<()> {
        self.set.check()?;
        let set = self.set.clone();
        let plan = set.plan;
        let t = job.weight;
        let s = shape(t)?;
        let align = plan.align;
        let batch = job.batch as u64;
        let tile = MATMUL_TILE as u64;
        // Columns per dispatch: X and Y spans within a binding.
        let room = plan.max_binding.saturating_sub(align);
        let max_cols = if tiled {
            plan.max_dim * tile
        } else {
            matvec_cols
        };
        let per_cols = (room / (s.k * 4)).min(room / (s.rows * 4)).min(max_cols);
        if per_cols == 0 {
            return Err(GpuError::TooLarge {
                what: format!("one column of {} in a storage binding", t.name),
                bytes: s.k.max(s.rows) * 4 + align,
                limit: plan.max_binding,
            }
            .into());
        }
        span(&job.x, 0, batch * s.k, align, "x")?;
        span(&job.y, 0, batch * s.rows, align, "y")?;
        let max_rows = if tiled {
            plan.max_dim * tile
        } else {
            plan.max_dim * plan.max_dim
        };
        let runs = row_runs(&plan, t, &s, max_rows)?;
        let rows_per_group = (WORKGROUP_SIZE / plan.threads) as u64;
        let mut c0 = 0;
        while c0 < batch {
            let cols = per_cols.min(batch - c0);
            let x = span(&job.x, c0 * s.k, cols * s.k, align, "x")?;
            let vec_x = !tiled && s.k.is_multiple_of(4) && x.skip.is_multiple_of(4);
            let key = if tiled {
                KernelKey::matmul(s.format)
            } else {
                KernelKey::matvec(s.format, cols as u32, plan.threads, vec_x)
            };
            let (pipeline, layout) = set.pipeline(&key)?;
            for run in &runs {
                let y_first = c0 * s.rows + run.first;
                let y = span(&job.y, y_first, (cols - 1) * s.rows + run.count, align, "y")?;
                let binds = operands(&layout, |b| match b {
                    binding::W => Some(Bind {
                        buffer: run.buffer,
                        offset: run.offset,
                        size: run.size,
                    }),
                    binding::X | binding::XV => Some(Bind::span(job.x.buffer, x)),
                    binding::Y => Some(Bind::span(job.y.buffer, y)),
                    binding::GRIDS => Some(grids(&set.tables)),
                    _ => None,
                })?;
                if tiled {
                    let p = MatMulParams {
                        k: s.k as u32,
                        n_rows: run.count as u32,
                        row_bytes: s.row_bytes as u32,
                        w_skip: run.skip as u32,
                        x_skip: x.skip,
                        y_skip: y.skip,
                        y_stride: s.rows as u32,
                        n_cols: cols as u32,
                    };
                    let groups = (
                        run.count.div_ceil(tile) as u32,
                        cols.div_ceil(tile) as u32,
                        1,
                    );
                    self.record(
                        pass,
                        &pipeline,
                        &layout,
                        &binds,
                        bytemuck::bytes_of(&p),
                        groups,
                    )?;
                } else {
                    let p = MatVecParams {
                        k: s.k as u32,
                        n_rows: run.count as u32,
                        row_bytes: s.row_bytes as u32,
                        w_skip: run.skip as u32,
                        x_skip: x.skip,
                        y_skip: y.skip,
                        y_stride: s.rows as u32,
                        ..MatVecParams::default()
                    };
                    let (gx, gy) = windows::grid(run.count.div_ceil(rows_per_group), plan.max_dim);
                    self.record(
                        pass,
                        &pipeline,
                        &layout,
                        &binds,
                        bytemuck::bytes_of(&p),
                        (gx, gy, 1),
                    )?;
                }
            }
            c0 += cols;
        }
        Ok(())
    }

    /// Records a row gather: `out[i] = W[ids[i]]` as `dtype` values.
    pub fn get_rows(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        job: &GetRowsJob<'_>,
    ) -> Result<()> {
        self.set.check()?;
        let set = self.set.clone();
        let plan = set.plan;
        let t = job.weight;
        let s = shape(t)?;
        let align = plan.align;
        let size = job.dtype.size() as u64;
        let n_ids = job.n_ids as u64;
        if n_ids == 0 {
            return Ok(());
        }
        span(&job.ids, 0, n_ids, align, "ids")?;
        let out_align = align.max(windows::DST_ALIGN);
        if !job.out.offset.is_multiple_of(out_align) {
            return Err(invalid(format!(
                "get_rows output offset {} is not a multiple of {out_align}",
                job.out.offset
            )));
        }
        let row_out = s.k * size;
        let out_len = (n_ids * row_out).next_multiple_of(windows::DST_ALIGN);
        if job.out.offset + out_len > job.out.buffer.size() {
            return Err(invalid(format!(
                "get_rows output needs {out_len} bytes from {}, the buffer has {}",
                job.out.offset,
                job.out.buffer.size()
            )));
        }
        let runs = row_runs(&plan, t, &s, u64::MAX)?;
        if !s.k.is_multiple_of(8) && runs.len() > 1 {
            return Err(invalid(format!(
                "{}: rows of {} values (not a multiple of 8) are gathered from one binding only",
                t.name, s.k
            )));
        }
        // Ids per window: output windows start on aligned offsets and fit a binding, and their
        // groups of GET_ROWS_VALUES values fit the grid.
        let per_group = (WORKGROUP_SIZE * GET_ROWS_VALUES) as u64;
        let l = out_align.max(32);
        let step = l / windows::gcd(l, row_out);
        let room = plan.max_binding.saturating_sub(64);
        let by_groups = plan.max_dim * plan.max_dim * per_group / s.k;
        let per = (room / row_out).min(by_groups).min(u32::MAX as u64 / s.k) / step * step;
        if per == 0 {
            return Err(GpuError::TooLarge {
                what: format!("{step} gathered rows of {} in a storage binding", t.name),
                bytes: step * row_out,
                limit: plan.max_binding,
            }
            .into());
        }
        let (pipeline, layout) = set.pipeline(&KernelKey::get_rows(s.format, job.dtype))?;
        let mut i0 = 0;
        while i0 < n_ids {
            let n = per.min(n_ids - i0);
            let n_out = n * s.k;
            let ids = span(&job.ids, i0, n, align, "ids")?;
            let out = Bind {
                buffer: job.out.buffer,
                offset: job.out.offset + i0 * row_out,
                size: (n_out * size).next_multiple_of(windows::DST_ALIGN),
            };
            let (gx, gy) = windows::grid(n_out.div_ceil(per_group), plan.max_dim);
            for run in &runs {
                let binds = operands(&layout, |b| match b {
                    binding::W => Some(Bind {
                        buffer: run.buffer,
                        offset: run.offset,
                        size: run.size,
                    }),
                    binding::Y => Some(out),
                    binding::IDS => Some(Bind::span(job.ids.buffer, ids)),
                    binding::GRIDS => Some(grids(&set.tables)),
                    _ => None,
                })?;
                let p = GetRowsParams {
                    k: s.k as u32,
                    n_out: n_out as u32,
                    row_bytes: s.row_bytes as u32,
                    w_skip: run.skip as u32,
                    row_first: run.first as u32,
                    row_count: run.count as u32,
                    n_rows: s.rows.min(u32::MAX as u64) as u32,
                    ids_skip: ids.skip,
                };
                self.record(
                    pass,
                    &pipeline,
                    &layout,
                    &binds,
                    bytemuck::bytes_of(&p),
                    (gx, gy, 1),
                )?;
            }
            i0 += n;
        }
        Ok(())
    }

    /// Records ggml's `MUL_MAT_ID` (see [`MatVecIdJob`]).
    pub fn matvec_id(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        job: &MatVecIdJob<'_>,
    ) -> Result<()> {
        self.set.check()?;
        let set = self.set.clone();
        let plan = set.plan;
        let t = job.weight;
        let s = shape(t)?;
        let n = t.dims.get(1).copied().unwrap_or(1);
        let experts = s.rows / n.max(1);
        if n == 0 || experts * n != s.rows || experts > u32::MAX as u64 {
            return Err(invalid(format!(
                "{}: dims {:?} are not [K, N, E]",
                t.name, t.dims
            )));
        }
        if job.slots == 0 {
            return Err(invalid("matvec_id needs at least one slot".into()));
        }
        let pairs = job.tokens as u64 * job.slots as u64;
        if pairs == 0 {
            return Ok(());
        }
        let align = plan.align;
        let x_rows = if job.x_per_slot {
            pairs
        } else {
            job.tokens as u64
        };
        let x = span(&job.x, 0, x_rows * s.k, align, "x")?;
        if x.size > plan.max_binding {
            return Err(GpuError::TooLarge {
                what: "matvec_id inputs in one storage binding".into(),
                bytes: x.size,
                limit: plan.max_binding,
            }
            .into());
        }
        span(&job.ids, 0, pairs, align, "ids")?;
        span(&job.y, 0, pairs * n, align, "y")?;
        let room = plan.max_binding.saturating_sub(align);
        let per = (room / (n * 4)).min(plan.max_dim);
        let rows_per_group = (WORKGROUP_SIZE / plan.threads) as u64;
        if per == 0 || n.div_ceil(rows_per_group) > plan.max_dim * plan.max_dim {
            return Err(GpuError::TooLarge {
                what: format!("one expert's outputs of {} in a storage binding", t.name),
                bytes: n * 4,
                limit: plan.max_binding,
            }
            .into());
        }
        let runs = row_runs(&plan, t, &s, u64::MAX)?;
        let vec_x = s.k.is_multiple_of(4) && x.skip.is_multiple_of(4);
        let key = KernelKey::matvec_id(s.format, plan.threads, vec_x);
        let (pipeline, layout) = set.pipeline(&key)?;
        let (gx, gy) = windows::grid(n.div_ceil(rows_per_group), plan.max_dim);
        let mut p0 = 0;
        while p0 < pairs {
            let np = per.min(pairs - p0);
            let ids = span(&job.ids, p0, np, align, "ids")?;
            let y = span(&job.y, p0 * n, np * n, align, "y")?;
            for run in &runs {
                let binds = operands(&layout, |b| match b {
                    binding::W => Some(Bind {
                        buffer: run.buffer,
                        offset: run.offset,
                        size: run.size,
                    }),
                    binding::X | binding::XV => Some(Bind::span(job.x.buffer, x)),
                    binding::Y => Some(Bind::span(job.y.buffer, y)),
                    binding::IDS => Some(Bind::span(job.ids.buffer, ids)),
                    binding::GRIDS => Some(grids(&set.tables)),
                    _ => None,
                })?;
                let p = MatVecParams {
                    k: s.k as u32,
                    n_rows: n as u32,
                    row_bytes: s.row_bytes as u32,
                    w_skip: run.skip as u32,
                    x_skip: x.skip,
                    y_skip: y.skip,
                    y_stride: n as u32,
                    row_first: run.first as u32,
                    row_count: run.count as u32,
                    n_experts: experts as u32,
                    slots: job.slots,
                    x_per_slot: u32::from(job.x_per_slot),
                    pair_first: p0 as u32,
                    ids_skip: ids.skip,
                };
                self.record(
                    pass,
                    &pipeline,
                    &layout,
                    &binds,
                    bytemuck::bytes_of(&p),
                    (gx, gy, np as u32),
                )?;
            }
            p0 += np;
        }
        Ok(())
    }
}

/// The grids binding: the engine's tables buffer, whole.
fn grids(tables: &wgpu::Buffer) -> Bind<'_> {
    Bind {
        buffer: tables,
        offset: 0,
        size: tables.size(),
    }
}

/// The buffers of `layout`'s bindings in order, from `of` (binding number → buffer run).
fn operands<'a>(layout: &Layout, of: impl Fn(u32) -> Option<Bind<'a>>) -> Result<Vec<Bind<'a>>> {
    layout
        .bindings
        .iter()
        .map(|&(b, _)| {
            of(b).ok_or_else(|| GpuError::Invariant(format!("no buffer for binding {b}")).into())
        })
        .collect()
}

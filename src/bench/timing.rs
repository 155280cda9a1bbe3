//! The measurements both kinds of row share: adapters opened for timing, the median of timed
//! runs, GPU-resident dequantisation and copy cases over rotations of distinct buffers, and the
//! rooflines of a dequantisation's traffic ([`time_gpu`]).

use super::budget::{self, Measured};
use super::rotation::{plan_rotation, Rotation, HOST_CAP};
use crate::gpu::roofline::{self, ShaderCopy, StreamJob};
use crate::gpu::timing::{GpuTimer, Timing};
use crate::gpu::{buffers, DequantJob, EngineOptions, GpuEngine};
use crate::{cpu, DType, Format, Result};

/// An adapter opened for benchmarking: an engine on its own device (with timestamp queries when
/// the adapter has them), a timer and the shader-copy roofline.
#[derive(Debug)]
pub struct BenchAdapter {
    /// The engine.
    pub engine: GpuEngine,
    /// Its timer.
    pub timer: GpuTimer,
    /// The streaming kernel, compiled and checked on this adapter.
    pub shader_copy: ShaderCopy,
}

impl BenchAdapter {
    /// Opens `adapter` for benchmarking with an engine of `options` (the kernels' choices, such
    /// as [`EngineOptions::precision`]): `wall` times with the wall clock even where
    /// the adapter has timestamp queries. The shader copy is compiled and its output checked
    /// word for word ([`ShaderCopy::check`]).
    pub fn open(
        adapter: &wgpu::Adapter,
        wall: bool,
        options: EngineOptions,
    ) -> Result<BenchAdapter> {
        let engine = GpuEngine::from_adapter(adapter, options)?;
        let timer = if wall {
            GpuTimer::wall()
        } else {
            GpuTimer::new(&engine)?
        };
        let shader_copy = ShaderCopy::new(&engine)?;
        shader_copy.check(&engine)?;
        Ok(BenchAdapter {
            engine,
            timer,
            shader_copy,
        })
    }
}

/// The GPU side of a [`super::BenchResult`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuFigures {
    /// Median seconds of one dequantisation (a timed run's time ÷ [`Rotation::pairs`]).
    pub seconds: f64,
    /// Bytes the copy read (and wrote): `(bytes_in + bytes_out) / 2`, rounded up to 4.
    pub copy_bytes: u64,
    /// Median seconds of one copy.
    pub copy_seconds: f64,
    /// Bytes the shader copy read plus wrote: `bytes_in` and `bytes_out` of each window rounded
    /// up to 16.
    pub shader_copy_bytes: u64,
    /// Median seconds of one shader copy.
    pub shader_copy_seconds: f64,
    /// What each timed run of the dequantisation rotated through (the rooflines' runs go
    /// through as many pairs, or fewer where their own time budget ran out first).
    pub rotation: Rotation,
    /// Timed runs of the dequantisation (fewer than asked where the time budget ran out).
    pub runs: usize,
    /// How all three were measured.
    pub timing: Timing,
}

pub(crate) fn gbps(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds.max(1e-12) / 1e9
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One dequantisation, GPU-resident over [`GpuCase::pairs`] distinct source/output buffer pairs
/// (the raw blocks uploaded once into each source, the outputs allocated once): each
/// [`GpuCase::run`] is one timed command buffer that decodes the whole tensor once per pair, and
/// [`GpuCase::run_shader_copy`] the same for the shader-copy roofline on the same buffers.
pub struct GpuCase<'a> {
    adapter: &'a BenchAdapter,
    format: Format,
    dtype: DType,
    n_blocks: u64,
    pairs: Vec<(wgpu::Buffer, wgpu::Buffer)>,
}

impl<'a> GpuCase<'a> {
    /// Uploads `blocks` (whole blocks of `format`) to `adapter` once and compiles the pipeline.
    pub fn new(
        adapter: &'a BenchAdapter,
        format: Format,
        dtype: DType,
        blocks: &[u8],
    ) -> Result<GpuCase<'a>> {
        GpuCase::rotating(adapter, format, dtype, blocks, 1)
    }

    /// [`GpuCase::new`] over `pairs` (at least 1) distinct buffer pairs, each holding `blocks`.
    pub fn rotating(
        adapter: &'a BenchAdapter,
        format: Format,
        dtype: DType,
        blocks: &[u8],
        pairs: u64,
    ) -> Result<GpuCase<'a>> {
        let engine = &adapter.engine;
        engine.prepare(format, dtype)?;
        let n_blocks = cpu::n_values(format, blocks.len())? as u64 / format.block_elems() as u64;
        let (src_len, dst_len) = roofline::buffer_sizes(format, dtype, n_blocks);
        let storage = wgpu::BufferUsages::STORAGE;
        let device = engine.device();
        let pairs = (0..pairs.max(1))
            .map(|_| {
                Ok((
                    buffers::upload_sized(device, "bench source", blocks, src_len, storage)?,
                    buffers::upload_sized(device, "bench output", &[], dst_len, storage)?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(GpuCase {
            adapter,
            format,
            dtype,
            n_blocks,
            pairs,
        })
    }

    /// Distinct buffer pairs one run goes through.
    pub fn pairs(&self) -> u64 {
        self.pairs.len() as u64
    }

    /// Quantised bytes read plus output bytes written by one dequantisation.
    pub fn traffic(&self) -> u64 {
        self.n_blocks
            * (self.format.block_bytes() + self.format.block_elems() * self.dtype.size()) as u64
    }

    /// One timed run (one dequantisation per pair): seconds per dequantisation, and how they
    /// were measured.
    pub fn run(&self) -> Result<(f64, Timing)> {
        self.run_first(self.pairs.len())
    }

    /// [`GpuCase::run`] over the first `n` pairs (at least one, at most all).
    pub fn run_first(&self, n: usize) -> Result<(f64, Timing)> {
        let engine = &self.adapter.engine;
        let pairs = &self.pairs[..n.clamp(1, self.pairs.len())];
        let (seconds, timing) = self.adapter.timer.time(engine, |encoder| {
            for (src, dst) in pairs {
                let job = DequantJob {
                    format: self.format,
                    dtype: self.dtype,
                    src,
                    src_offset: 0,
                    n_blocks: self.n_blocks,
                    dst,
                    dst_offset: 0,
                };
                engine.record(encoder, &job)?;
            }
            Ok(())
        })?;
        Ok((seconds / pairs.len() as f64, timing))
    }

    /// One timed run of the shader-copy roofline with this case's traffic shape, one per pair
    /// of the first `n` (at least one, at most all): seconds per copy, and how they were
    /// measured.
    pub fn run_shader_copy(&self, n: usize) -> Result<(f64, Timing)> {
        let engine = &self.adapter.engine;
        let pairs = &self.pairs[..n.clamp(1, self.pairs.len())];
        let (seconds, timing) = self.adapter.timer.time(engine, |encoder| {
            for (src, dst) in pairs {
                self.adapter
                    .shader_copy
                    .record(engine, encoder, &self.stream_job(src, dst))?;
            }
            Ok(())
        })?;
        Ok((seconds / pairs.len() as f64, timing))
    }

    /// Bytes one shader copy reads plus writes: [`GpuCase::traffic`] with each window's input
    /// and output rounded up to 16 bytes.
    pub fn shader_copy_traffic(&self) -> Result<u64> {
        let engine = &self.adapter.engine;
        let windows = roofline::stream_windows(
            self.format,
            self.dtype,
            self.n_blocks,
            engine.max_binding_size(),
            engine.offset_alignment(),
        )?;
        Ok(windows.iter().map(roofline::StreamWindow::traffic).sum())
    }

    fn stream_job<'b>(&self, src: &'b wgpu::Buffer, dst: &'b wgpu::Buffer) -> StreamJob<'b> {
        StreamJob {
            format: self.format,
            dtype: self.dtype,
            n_blocks: self.n_blocks,
            src,
            dst,
        }
    }
}

/// `copy_buffer_to_buffer` of `bytes` bytes over distinct buffer pairs of one adapter (one, or
/// as many as [`CopyCase::rotating`] is given): each [`CopyCase::run`] copies once per pair.
pub struct CopyCase<'a> {
    adapter: &'a BenchAdapter,
    bytes: u64,
    pairs: Vec<(wgpu::Buffer, wgpu::Buffer)>,
}

impl<'a> CopyCase<'a> {
    /// Buffers for a copy of `bytes` (rounded up to 4) bytes; the source starts with `fill`, then
    /// zeros.
    pub fn new(adapter: &'a BenchAdapter, bytes: u64, fill: &[u8]) -> Result<CopyCase<'a>> {
        CopyCase::rotating(adapter, bytes, fill, 1)
    }

    /// [`CopyCase::new`] over `pairs` (at least 1) distinct buffer pairs.
    pub fn rotating(
        adapter: &'a BenchAdapter,
        bytes: u64,
        fill: &[u8],
        pairs: u64,
    ) -> Result<CopyCase<'a>> {
        let bytes = copy_bytes(bytes);
        let device = adapter.engine.device();
        let fill = &fill[..fill.len().min(bytes as usize)];
        let pairs = (0..pairs.max(1))
            .map(|_| {
                Ok((
                    buffers::upload_sized(
                        device,
                        "bench copy source",
                        fill,
                        bytes,
                        wgpu::BufferUsages::COPY_SRC,
                    )?,
                    buffers::upload_sized(
                        device,
                        "bench copy destination",
                        &[],
                        bytes,
                        wgpu::BufferUsages::COPY_DST,
                    )?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(CopyCase {
            adapter,
            bytes,
            pairs,
        })
    }

    /// Bytes copied (read, and again written).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// One timed run (one copy per pair): seconds per copy.
    pub fn run(&self) -> Result<(f64, Timing)> {
        self.run_first(self.pairs.len())
    }

    /// [`CopyCase::run`] over the first `n` pairs (at least one, at most all).
    pub fn run_first(&self, n: usize) -> Result<(f64, Timing)> {
        let pairs = &self.pairs[..n.clamp(1, self.pairs.len())];
        let (seconds, timing) = self.adapter.timer.time(&self.adapter.engine, |encoder| {
            for (src, dst) in pairs {
                roofline::record_copy(encoder, src, dst, self.bytes);
            }
            Ok(())
        })?;
        Ok((seconds / pairs.len() as f64, timing))
    }
}

/// `bytes` rounded up to a multiple of 4 (at least 4): what a copy of `bytes` moves.
fn copy_bytes(bytes: u64) -> u64 {
    bytes.max(4).div_ceil(4) * 4
}

/// Median seconds of `runs` runs of `f` after `warmup` untimed ones, and how they were timed.
pub(crate) fn median_of(
    warmup: usize,
    runs: usize,
    mut f: impl FnMut() -> Result<(f64, Timing)>,
) -> Result<(f64, Timing)> {
    let mut times = Vec::with_capacity(runs);
    let mut how = Timing::Wall;
    for i in 0..warmup + runs {
        let (t, h) = f()?;
        how = h;
        if i >= warmup {
            times.push(t);
        }
    }
    Ok((median(times), how))
}

/// How the GPU measurements of a run are made: runs after warm-ups, the traffic target of
/// each timed run, the time budget of each measurement ([`super::budget`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Runs {
    pub warmup: usize,
    pub runs: usize,
    pub target: u64,
    pub budget: Option<f64>,
}

impl Runs {
    /// [`budget::measure`] with these runs, over at most `units` units.
    pub fn measure(
        &self,
        units: usize,
        run: impl FnMut(usize) -> Result<(f64, Timing)>,
    ) -> Result<Measured> {
        budget::measure(self.budget, units, self.warmup, self.runs, run)
    }
}

/// GPU time of `format` → `dtype` on `adapter`, of the shader copy with its traffic shape and of
/// the buffer copy of the same traffic, each timed run rotating through enough buffer pairs to
/// move the target bytes, or as many as the time budget allows (the dequantisation's; the
/// rooflines rotate through as many).
pub(crate) fn time_gpu(
    adapter: &BenchAdapter,
    format: Format,
    dtype: DType,
    src: &[u8],
    how: &Runs,
) -> Result<GpuFigures> {
    let n_blocks = cpu::n_values(format, src.len())? as u64 / format.block_elems() as u64;
    let traffic = src.len() as u64 + n_blocks * (format.block_elems() * dtype.size()) as u64;
    let copy_bytes = copy_bytes(traffic.div_ceil(2));
    let (src_len, dst_len) = roofline::buffer_sizes(format, dtype, n_blocks);
    let pair_bytes = (src_len + dst_len).max(2 * copy_bytes);
    let planned = plan_rotation(traffic, pair_bytes, how.target, HOST_CAP);
    let (dequant, shader_copy, shader_copy_bytes) = {
        let case = GpuCase::rotating(adapter, format, dtype, src, planned.pairs)?;
        let dequant = how.measure(planned.pairs as usize, |n| case.run_first(n))?;
        let units = dequant.plan.units;
        let shader = how.measure(units, |n| case.run_shader_copy(n))?;
        (dequant, shader, case.shader_copy_traffic()?)
    };
    let units = dequant.plan.units;
    let copy = CopyCase::rotating(adapter, copy_bytes, src, units as u64)?;
    let copy_seconds = how.measure(units, |n| copy.run_first(n))?.seconds;
    Ok(GpuFigures {
        seconds: dequant.seconds,
        copy_bytes,
        copy_seconds,
        shader_copy_bytes,
        shader_copy_seconds: shader_copy.seconds,
        rotation: Rotation {
            pairs: units as u64,
            bytes_per_run: units as u64 * traffic,
            ..planned
        },
        runs: dequant.plan.runs,
        timing: dequant.timing,
    })
}

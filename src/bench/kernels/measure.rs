//! The kernel rows' measurements: per adapter × format × shape one setup (the reference
//! dequantisation with its rooflines, the rotation of weight copies, X), then one function per
//! kernel. Every timed run records its calls with one kept [`Recorder`] into one compute pass, as
//! an engine's step would; [`RecordingCost`] measures the CPU side of one call both ways.

use std::sync::Arc;
use std::time::Instant;

use super::{
    matmul_batch_for, matmul_traffic, KernelConfig, KernelResult, RecordingCost, Unfused,
    WeightShape, MOE_EXPERTS, MOE_SLOTS, OUTPUT_POOL, RECORDING_CALLS,
};
use crate::bench::budget::Measured;
use crate::bench::rotation::{plan_rotation, Rotation, HOST_CAP};
use crate::bench::timing::{time_gpu, BenchAdapter, GpuFigures, Runs};
use crate::formats::sample::{normal_blocks, Rng};
use crate::gpu::kernels::{
    GetRowsJob, Job, KernelKey, MatVecIdJob, MulMatJob, Op, Operand, Recorder,
};
use crate::gpu::loader::ResidentTensor;
use crate::gpu::{buffers, roofline, DequantJob};
use crate::{DType, Format, Result};

/// What one adapter × format × shape measures with, and how.
pub(in crate::bench) struct KernelRun<'a> {
    pub adapter: &'a BenchAdapter,
    pub index: usize,
    pub config: &'a KernelConfig,
    pub how: Runs,
}

/// What every row of one (format, shape) shares.
struct Setup {
    format: Format,
    shape: WeightShape,
    /// `"Q4_0 4096x4096 … on llvmpipe (vulkan)"` for progress.
    on: String,
    weight_bytes: u64,
    /// The weight copies a timed run goes through: as many as planned on the weight's bytes, or
    /// one ([`KernelConfig::one_weight`]).
    weights: Vec<ResidentTensor>,
    /// Calls a timed run makes (at most): one per weight copy, or as many as there would be
    /// copies, all on the one weight.
    calls: usize,
    /// The reference dequantisation to f32 and its traffic.
    dequant: GpuFigures,
    dequant_bytes: u64,
    /// X: enough columns for every row.
    x: wgpu::Buffer,
}

impl Setup {
    /// The weight call `i` reads.
    fn weight(&self, i: usize) -> &ResidentTensor {
        &self.weights[i % self.weights.len()]
    }
}

/// One measured call: seconds per call, how it was timed and over what rotation, the bytes and
/// flops a call counts, and its batch.
struct Timed {
    op: Op,
    batch: u32,
    bytes: u64,
    flops: Option<u64>,
    measured: Measured,
    /// Bytes one call counts toward a timed run's traffic.
    call_traffic: u64,
    unfused: Option<Unfused>,
    recording: RecordingCost,
}

/// `y = weight · x` over whole buffers, `batch` columns.
fn whole_job<'a>(
    weight: &'a ResidentTensor,
    x: &'a wgpu::Buffer,
    y: &'a wgpu::Buffer,
    batch: u32,
) -> MulMatJob<'a> {
    MulMatJob {
        weight,
        x: Operand::whole(x),
        y: Operand::whole(y),
        batch,
    }
}

/// `calls` matvecs of `batch` columns on `weights` and into `ys`, each taken cyclically.
fn matvec_jobs<'a>(
    weights: &'a [ResidentTensor],
    calls: usize,
    x: &'a wgpu::Buffer,
    ys: &'a [wgpu::Buffer],
    batch: u32,
) -> Vec<Job<'a>> {
    (0..calls)
        .map(|i| {
            let w = &weights[i % weights.len()];
            Job::MatVec(whole_job(w, x, &ys[i % ys.len()], batch))
        })
        .collect()
}

/// Up to `want` buffers of `bytes` each (at least one), at most [`OUTPUT_POOL`] bytes together.
fn output_pool(adapter: &BenchAdapter, bytes: u64, want: u64) -> Result<Vec<wgpu::Buffer>> {
    let bytes = bytes.next_multiple_of(16).max(16);
    let count = want.min(OUTPUT_POOL / bytes).max(1);
    (0..count)
        .map(|_| {
            Ok(buffers::upload_sized(
                adapter.engine.device(),
                "bench kernel output",
                &[],
                bytes,
                wgpu::BufferUsages::STORAGE,
            )?)
        })
        .collect()
}

/// `values` f32 in [-1, 1) from `seed`, as a storage buffer.
fn random_f32(adapter: &BenchAdapter, values: u64, seed: u64) -> Result<wgpu::Buffer> {
    let mut rng = Rng::new(seed);
    let v: Vec<f32> = (0..values)
        .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect();
    Ok(buffers::upload(
        adapter.engine.device(),
        "bench kernel x",
        bytemuck::cast_slice(&v),
    )?)
}

/// `calls` buffers of random u32 values below `below`, `per` each.
fn random_ids(
    adapter: &BenchAdapter,
    calls: usize,
    per: u32,
    below: u64,
    seed: u64,
) -> Result<Vec<wgpu::Buffer>> {
    let mut rng = Rng::new(seed);
    (0..calls)
        .map(|_| {
            let v: Vec<u32> = (0..per).map(|_| (rng.next_u64() % below) as u32).collect();
            Ok(buffers::upload(
                adapter.engine.device(),
                "bench ids",
                bytemuck::cast_slice(&v),
            )?)
        })
        .collect()
}

impl KernelRun<'_> {
    /// Every row of `format` on `shape`, calling `step` before each measurement.
    pub fn measure(
        &self,
        format: Format,
        shape: WeightShape,
        step: &mut dyn FnMut(String),
    ) -> Result<Vec<KernelResult>> {
        let s = self.setup(format, shape, step)?;
        let mut f16 = None;
        let mut rows = Vec::new();
        for &op in &self.config.ops {
            match op {
                Op::MatVec => {
                    for &batch in &self.config.matvec_batches {
                        rows.push(self.matvec(&s, batch, &mut f16, step)?);
                    }
                }
                Op::MatMul => rows.push(self.matmul(&s, step)?),
                Op::GetRows => rows.push(self.get_rows(&s, step)?),
                Op::MatVecId => rows.push(self.matvec_id(&s, step)?),
            }
        }
        rows.into_iter().map(|t| self.row(&s, t)).collect()
    }

    fn row(&self, s: &Setup, t: Timed) -> Result<KernelResult> {
        let engine = &self.adapter.engine;
        let variant = KernelKey::names(&engine.kernels_for(t.op, s.weight(0), t.batch as u64)?);
        Ok(KernelResult {
            adapter: self.index,
            format: s.format,
            op: t.op,
            shape: s.shape,
            batch: t.batch,
            weight_bytes: s.weight_bytes,
            bytes: t.bytes,
            flops: t.flops,
            seconds: t.measured.seconds,
            rotation: self.rotation(&t.measured, t.call_traffic),
            one_weight: self.config.one_weight,
            runs: t.measured.plan.runs,
            timing: t.measured.timing,
            dequant_bytes: s.dequant_bytes,
            dequant: s.dequant,
            unfused: t.unfused,
            recording: t.recording,
            variant,
        })
    }

    /// The reference dequantisation, the weight copies and X.
    fn setup(
        &self,
        format: Format,
        shape: WeightShape,
        step: &mut dyn FnMut(String),
    ) -> Result<Setup> {
        let engine = &self.adapter.engine;
        let info = engine.adapter_info();
        let on = format!(
            "{} ({})",
            info.name,
            info.backend.to_string().to_lowercase()
        );
        let n_blocks = shape.values() / format.block_elems() as u64;
        let blocks = normal_blocks(format, n_blocks as usize, 1);
        let weight_bytes = blocks.len() as u64;
        step(format!(
            "{format} {shape} dequantised to f32 (reference) on {on}"
        ));
        let dequant = time_gpu(self.adapter, format, DType::F32, &blocks, &self.how)?;
        let rotation = plan_rotation(weight_bytes, weight_bytes, self.how.target, HOST_CAP);
        let dims = [shape.k, shape.n];
        let weights = (0..self.copies(rotation.pairs))
            .map(|i| {
                ResidentTensor::upload(engine, &format!("bench weight {i}"), format, &dims, &blocks)
            })
            .collect::<Result<Vec<_>>>()?;
        let x_cols = self
            .config
            .ops
            .iter()
            .map(|op| match op {
                Op::MatVec => self
                    .config
                    .matvec_batches
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(1),
                Op::MatMul => self.matmul_batch(),
                Op::GetRows => 0,
                Op::MatVecId => 1,
            })
            .max()
            .unwrap_or(0);
        let x = random_f32(self.adapter, x_cols.max(1) as u64 * shape.k, 2)?;
        Ok(Setup {
            format,
            shape,
            on,
            weight_bytes,
            weights,
            calls: rotation.pairs as usize,
            dequant,
            dequant_bytes: weight_bytes + 4 * shape.values(),
            x,
        })
    }

    /// Distinct copies for a timed run of `calls` calls: one each, or one in all
    /// ([`KernelConfig::one_weight`]).
    fn copies(&self, calls: u64) -> u64 {
        if self.config.one_weight {
            1
        } else {
            calls
        }
    }

    fn matmul_batch(&self) -> u32 {
        self.config
            .matmul_batch
            .unwrap_or_else(|| matmul_batch_for(self.adapter.engine.adapter_info().device_type))
    }

    /// Median seconds per call of `jobs` (or of as many of the first as the time budget
    /// allows), every timed run recording them with one kept recorder into one compute pass.
    fn time_jobs(&self, jobs: &[Job<'_>]) -> Result<Measured> {
        let engine = &self.adapter.engine;
        let mut recorder = engine.recorder();
        self.how.measure(jobs.len(), |n| {
            let jobs = &jobs[..n.clamp(1, jobs.len())];
            let (s, t) = self
                .adapter
                .timer
                .time(engine, |encoder| record_all(&mut recorder, encoder, jobs))?;
            Ok((s / jobs.len() as f64, t))
        })
    }

    /// The rotation `m` went through, `traffic` bytes per unit.
    fn rotation(&self, m: &Measured, traffic: u64) -> Rotation {
        Rotation {
            pairs: m.plan.units as u64,
            target_bytes: self.how.target,
            bytes_per_run: m.plan.units as u64 * traffic,
        }
    }

    /// The CPU side of recording `job` ([`RecordingCost`]), never submitted.
    fn recording_cost(&self, job: &Job<'_>) -> Result<RecordingCost> {
        let engine = &self.adapter.engine;
        let device = engine.device();
        let encoder = || device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        // One-shot: a recorder, a uniform buffer, bind groups and a pass per call.
        let mut enc = encoder();
        engine.record_job(&mut enc, job)?;
        let before = engine.kernel_objects_created();
        let t = Instant::now();
        for _ in 0..RECORDING_CALLS {
            engine.record_job(&mut enc, job)?;
        }
        let one_shot_seconds = t.elapsed().as_secs_f64() / RECORDING_CALLS as f64;
        let one_shot_objects =
            (engine.kernel_objects_created() - before) as f64 / RECORDING_CALLS as f64;
        drop(enc);
        // Kept: the same calls in one pass, a third time. The first fills the caches; where it
        // outgrew its uniform buffer, the second starts in one that holds it all (a buffer and
        // a bind group, once); the third is the steady state.
        let jobs = vec![*job; RECORDING_CALLS];
        let mut recorder = engine.recorder();
        for _ in 0..2 {
            record_all(&mut recorder, &mut encoder(), &jobs)?;
        }
        let before = recorder.stats();
        let objects_before = engine.kernel_objects_created();
        let t = Instant::now();
        record_all(&mut recorder, &mut encoder(), &jobs)?;
        let kept_seconds = t.elapsed().as_secs_f64() / RECORDING_CALLS as f64;
        let step = recorder.stats().since(&before);
        let kept_objects = engine.kernel_objects_created() - objects_before;
        // Apply the parameter writes queued by the calls above, so that they do not ride along
        // with the next timed submission.
        engine.queue().submit(std::iter::empty());
        Ok(RecordingCost {
            dispatches: step.dispatches / RECORDING_CALLS as u64,
            one_shot_seconds,
            one_shot_objects,
            kept_seconds,
            kept_objects: kept_objects.max(step.objects_created()),
        })
    }

    fn matvec(
        &self,
        s: &Setup,
        batch: u32,
        f16: &mut Option<(Vec<ResidentTensor>, f64, Rotation)>,
        step: &mut dyn FnMut(String),
    ) -> Result<Timed> {
        step(format!(
            "{} {} matvec ×{batch} on {}",
            s.format, s.shape, s.on
        ));
        let ys = output_pool(self.adapter, batch as u64 * s.shape.n * 4, s.calls as u64)?;
        let jobs = matvec_jobs(&s.weights, s.calls, &s.x, &ys, batch);
        let measured = self.time_jobs(&jobs)?;
        let unfused = if s.format == Format::F16 {
            None
        } else {
            if f16.is_none() {
                *f16 = Some(self.dequantise_to_f16(s)?);
            }
            let (copies, dequant_seconds, rotation) = f16.as_ref().expect("made above");
            let calls = rotation.pairs as usize;
            let matvec = self.time_jobs(&matvec_jobs(copies, calls, &s.x, &ys, batch))?;
            Some(Unfused {
                dequant_seconds: *dequant_seconds,
                matvec_seconds: matvec.seconds,
                rotation: *rotation,
            })
        };
        Ok(Timed {
            op: Op::MatVec,
            batch,
            bytes: s.weight_bytes,
            flops: Some(2 * s.shape.values() * batch as u64),
            measured,
            call_traffic: s.weight_bytes,
            unfused,
            recording: self.recording_cost(&jobs[0])?,
        })
    }

    fn matmul(&self, s: &Setup, step: &mut dyn FnMut(String)) -> Result<Timed> {
        let batch = self.matmul_batch();
        step(format!(
            "{} {} matmul ×{batch} on {}",
            s.format, s.shape, s.on
        ));
        let tile = self.adapter.engine.matmul_tile();
        let traffic = matmul_traffic(s.shape, s.weight_bytes, batch, tile);
        let planned = plan_rotation(traffic, s.weight_bytes, self.how.target, HOST_CAP);
        let calls = (planned.pairs as usize).min(s.calls);
        let ys = output_pool(self.adapter, batch as u64 * s.shape.n * 4, calls as u64)?;
        let jobs: Vec<Job<'_>> = (0..calls)
            .map(|i| Job::MatMul(whole_job(s.weight(i), &s.x, &ys[i % ys.len()], batch)))
            .collect();
        Ok(Timed {
            op: Op::MatMul,
            batch,
            bytes: s.weight_bytes,
            flops: Some(2 * s.shape.values() * batch as u64),
            measured: self.time_jobs(&jobs)?,
            call_traffic: traffic,
            unfused: None,
            recording: self.recording_cost(&jobs[0])?,
        })
    }

    fn get_rows(&self, s: &Setup, step: &mut dyn FnMut(String)) -> Result<Timed> {
        let n_ids = self.config.get_rows;
        step(format!(
            "{} {} get_rows ×{n_ids} on {}",
            s.format, s.shape, s.on
        ));
        let calls = s.calls;
        let ids = random_ids(self.adapter, calls, n_ids, s.shape.n, 3)?;
        let outs = output_pool(self.adapter, n_ids as u64 * s.shape.k * 4, calls as u64)?;
        let jobs: Vec<Job<'_>> = (0..calls)
            .map(|i| {
                Job::GetRows(GetRowsJob {
                    weight: s.weight(i),
                    ids: Operand::whole(&ids[i]),
                    n_ids,
                    out: Operand::whole(&outs[i % outs.len()]),
                    dtype: DType::F32,
                })
            })
            .collect();
        let bytes = n_ids as u64 * (s.weight_bytes / s.shape.n + 4 * s.shape.k);
        Ok(Timed {
            op: Op::GetRows,
            batch: n_ids,
            bytes,
            flops: None,
            measured: self.time_jobs(&jobs)?,
            call_traffic: bytes,
            unfused: None,
            recording: self.recording_cost(&jobs[0])?,
        })
    }

    /// One token's MUL_MAT_ID: the weight read as [`MOE_EXPERTS`] experts of `N / 8` rows, of
    /// which [`MOE_SLOTS`] (random per call) are multiplied.
    fn matvec_id(&self, s: &Setup, step: &mut dyn FnMut(String)) -> Result<Timed> {
        step(format!(
            "{} {} matvec_id {MOE_SLOTS} of {MOE_EXPERTS} experts on {}",
            s.format, s.shape, s.on
        ));
        let calls = s.calls;
        let n = s.shape.n / MOE_EXPERTS;
        let experts: Vec<ResidentTensor> = s
            .weights
            .iter()
            .map(|w| ResidentTensor {
                dims: vec![s.shape.k, n, MOE_EXPERTS],
                ..w.clone()
            })
            .collect();
        let ids = random_ids(self.adapter, calls, MOE_SLOTS, MOE_EXPERTS, 4)?;
        let ys = output_pool(self.adapter, MOE_SLOTS as u64 * n * 4, calls as u64)?;
        let jobs: Vec<Job<'_>> = (0..calls)
            .map(|i| {
                Job::MatVecId(MatVecIdJob {
                    weight: &experts[i % experts.len()],
                    x: Operand::whole(&s.x),
                    ids: Operand::whole(&ids[i]),
                    y: Operand::whole(&ys[i % ys.len()]),
                    tokens: 1,
                    slots: MOE_SLOTS,
                    x_per_slot: false,
                })
            })
            .collect();
        let bytes = s.weight_bytes / MOE_EXPERTS * MOE_SLOTS as u64;
        Ok(Timed {
            op: Op::MatVecId,
            batch: MOE_SLOTS,
            bytes,
            flops: Some(2 * s.shape.k * n * MOE_SLOTS as u64),
            measured: self.time_jobs(&jobs)?,
            call_traffic: bytes,
            unfused: None,
            recording: self.recording_cost(&jobs[0])?,
        })
    }

    /// Bytes the f16 copies may take beside the weights.
    fn f16_cap(&self, s: &Setup) -> u64 {
        HOST_CAP.saturating_sub(s.weight_bytes * s.weights.len() as u64)
    }

    /// f16 copies of the weight (as many as a rotation planned on their bytes, or as the time
    /// budget allows; one with [`KernelConfig::one_weight`]), the median seconds of one
    /// dequantisation into them (call `i` from weight `i mod weights` into copy `i mod copies`)
    /// and the rotation (its pairs: the calls a timed run makes).
    fn dequantise_to_f16(&self, s: &Setup) -> Result<(Vec<ResidentTensor>, f64, Rotation)> {
        let engine = &self.adapter.engine;
        engine.prepare(s.format, DType::F16)?;
        let n_blocks = s.shape.values() / s.format.block_elems() as u64;
        let f16_bytes = 2 * s.shape.values();
        let (_, dst_len) = roofline::buffer_sizes(s.format, DType::F16, n_blocks);
        let rotation = plan_rotation(
            f16_bytes,
            dst_len,
            self.how.target,
            self.f16_cap(s).max(dst_len),
        );
        let mut copies = (0..self.copies(rotation.pairs))
            .map(|i| {
                let buffer = buffers::upload_sized(
                    engine.device(),
                    "bench f16 weight",
                    &[],
                    dst_len,
                    wgpu::BufferUsages::STORAGE,
                )?;
                ResidentTensor::from_buffer(
                    &format!("bench f16 weight {i}"),
                    Format::F16,
                    &[s.shape.k, s.shape.n],
                    Arc::new(buffer),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let measured = self.how.measure(rotation.pairs as usize, |n| {
            let n = n.clamp(1, rotation.pairs as usize);
            let (t, how) = self.adapter.timer.time(engine, |encoder| {
                for i in 0..n {
                    let copy = &copies[i % copies.len()];
                    engine.record(
                        encoder,
                        &DequantJob {
                            format: s.format,
                            dtype: DType::F16,
                            src: &s.weight(i).parts[0].buffer,
                            src_offset: 0,
                            n_blocks,
                            dst: &copy.parts[0].buffer,
                            dst_offset: 0,
                        },
                    )?;
                }
                Ok(())
            })?;
            Ok((t / n as f64, how))
        })?;
        // The matvec on them reads only the copies written: as many calls as were timed.
        copies.truncate(measured.plan.units);
        let calls = measured.plan.units as u64;
        let rotation = Rotation {
            pairs: calls,
            bytes_per_run: calls * f16_bytes,
            ..rotation
        };
        Ok((copies, measured.seconds, rotation))
    }
}

/// `jobs` recorded with `recorder` into one compute pass of `encoder`, then finished.
fn record_all(
    recorder: &mut Recorder,
    encoder: &mut wgpu::CommandEncoder,
    jobs: &[Job<'_>],
) -> Result<()> {
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("bench kernels"),
            timestamp_writes: None,
        });
        for job in jobs {
            recorder.job(&mut pass, job)?;
        }
    }
    recorder.finish();
    Ok(())
}

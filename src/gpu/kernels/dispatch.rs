//! Our kernels' calls as dispatches of a [`Recorder`]: each call planned without wgpu
//! (`plan.rs`: checked, the weight's runs of whole rows per binding, the operands' spans,
//! column groups, parameters and grids), then its dispatches recorded as planned.

use super::family::get_rows::{plan_get_rows, GetRowsCall};
use super::family::matvec::{plan_mul, MulCall, MulOp, QuantizePlan};
use super::family::matvec_id::{plan_matvec_id, MatVecIdCall};
use super::params::QuantizeParams;
use super::plan::{extent, invalid, shape, Span};
use super::record::Bind;
use super::{Buf, Extent, GetRowsJob, KernelKey, Mapping, MatVecIdJob, MulMatJob, Recorder};
use crate::gpu::GpuError;
use crate::Result;

impl Recorder {
    /// Records `Y = W X` for 1 to [`MATVEC_MAX_BATCH`](super::MATVEC_MAX_BATCH) columns.
    pub fn matvec(&mut self, pass: &mut wgpu::ComputePass<'_>, job: &MulMatJob<'_>) -> Result<()> {
        self.mul(pass, job, MulOp::MatVec(None), &mut None)
    }

    /// Records [`Recorder::matvec`] for each of `jobs`, products that read the same x (a block's
    /// Q, K and V; an FFN's gate and up): where the integer path runs (precision `int8`), x is
    /// quantised once for the products that read it alike (the same K and columns), one
    /// quantiser where separate calls record one each. The results are those of separate calls,
    /// bit for bit. The jobs must name the same x operand, and none may write its y over the
    /// values of x that any of them reads (it would change x for the products after it).
    pub fn matvecs(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        jobs: &[MulMatJob<'_>],
    ) -> Result<()> {
        let Some(first) = jobs.first() else {
            return Ok(());
        };
        // Bytes of x each job reads and of y each writes: batch columns of K and of N values.
        let mut reads = Vec::with_capacity(jobs.len());
        let mut writes = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.iter().enumerate() {
            if job.x.buffer != first.x.buffer || job.x.offset != first.x.offset {
                return Err(invalid(format!(
                    "matvecs: job {i} reads another x than job 0 (they must share one)"
                )));
            }
            let s = shape(job.weight)?;
            let bytes = |n: u64| (job.batch as u64).saturating_mul(n).saturating_mul(4);
            reads.push(job.x.offset..job.x.offset.saturating_add(bytes(s.k)));
            writes.push(job.y.offset..job.y.offset.saturating_add(bytes(s.rows)));
        }
        for (i, (job, y)) in jobs.iter().zip(&writes).enumerate() {
            if job.y.buffer == first.x.buffer {
                if let Some(j) = reads
                    .iter()
                    .position(|x| x.start < y.end && y.start < x.end)
                {
                    return Err(invalid(format!(
                        "matvecs: job {i} writes y (bytes {}..{}) over the x job {j} reads (bytes {}..{})",
                        y.start, y.end, reads[j].start, reads[j].end
                    )));
                }
            }
        }
        let mut quantized = None;
        for job in jobs {
            self.mul(pass, job, MulOp::MatVec(None), &mut quantized)?;
        }
        Ok(())
    }

    /// [`Recorder::matvec`] on `mapping` whatever the policy would choose (the tuner times the
    /// candidates with it).
    pub(crate) fn matvec_mapped(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        job: &MulMatJob<'_>,
        mapping: Mapping,
    ) -> Result<()> {
        self.mul(pass, job, MulOp::MatVec(Some(mapping)), &mut None)
    }

    /// Records `Y = W X` for any number of columns: tiled through workgroup memory, or on CPU
    /// adapters (one invocation per matvec row) as matvecs of up to
    /// [`MATMUL_CPU_COLUMNS`](super::MATMUL_CPU_COLUMNS) columns, one invocation per row decoding
    /// each chunk once for all of them (measured faster there: no barriers, no workgroup-memory
    /// round trip).
    pub fn matmul(&mut self, pass: &mut wgpu::ComputePass<'_>, job: &MulMatJob<'_>) -> Result<()> {
        self.mul(pass, job, MulOp::MatMul, &mut None)
    }

    /// Plans the product ([`plan_mul`]) and records its dispatches. `quantized` is what the
    /// integer path's scratch holds from the calls before it that share x ([`Recorder::matvecs`];
    /// `None` elsewhere): a column group whose quantiser would write the same skips it.
    fn mul(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        job: &MulMatJob<'_>,
        op: MulOp,
        quantized: &mut Option<Quantized>,
    ) -> Result<()> {
        self.set.check()?;
        let set = self.set.clone();
        let t = job.weight;
        let call = MulCall {
            weight: t.layout(),
            batch: job.batch as u64,
            x: extent(&job.x, "x")?,
            y: extent(&job.y, "y")?,
            op,
        };
        let plan = plan_mul(&set.plan, &call, &|key| set.mapping(key))?;
        for group in &plan.groups {
            let (pipeline, layout) = set.pipeline(&group.key)?;
            let scratch = match &group.quantize {
                Some(q) => {
                    let b = self.scratch(q.bytes)?;
                    let now = Quantized {
                        x: job.x.buffer.clone(),
                        span: group.x,
                        blocks: q.blocks,
                        scratch: b.clone(),
                    };
                    if quantized.as_ref() != Some(&now) {
                        self.quantize(pass, job.x.buffer, group.x, &b, q)?;
                        *quantized = Some(now);
                    }
                    Some((b, q.bytes))
                }
                None => None,
            };
            let x = match &scratch {
                Some((b, bytes)) => Bind {
                    buffer: b,
                    offset: 0,
                    size: *bytes,
                },
                None => Bind::span(job.x.buffer, group.x),
            };
            for d in &group.dispatches {
                let run = &plan.runs[d.run];
                let w = &t.parts[run.part].buffer;
                let binds = operands(&group.key, |b| match b {
                    Buf::W | Buf::WV => Some(Bind {
                        buffer: w,
                        offset: run.offset,
                        size: run.size,
                    }),
                    Buf::X | Buf::XV => Some(x),
                    Buf::Y => Some(Bind::span(job.y.buffer, d.y)),
                    Buf::Grids => Some(grids(&set.tables)),
                    Buf::Ids => None,
                })?;
                self.record(pass, &pipeline, &layout, &binds, d.params.bytes(), d.grid)?;
            }
        }
        Ok(())
    }

    /// Records the integer path's quantiser `q`: the values of span `x` of `x_buffer` (whole
    /// blocks of 32) as int8 codes from word 0 of `scratch`, then one scale per block, then one
    /// word of sums of codes per block.
    fn quantize(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        x_buffer: &wgpu::Buffer,
        x: Span,
        scratch: &wgpu::Buffer,
        q: &QuantizePlan,
    ) -> Result<()> {
        let (pipeline, layout) = self.set.quantizer()?;
        let p = QuantizeParams {
            blocks: q.blocks as u32,
            x_skip: x.skip,
            d_at: (q.blocks * 8) as u32,
            s_at: (q.blocks * 9) as u32,
        };
        let out = Bind {
            buffer: scratch,
            offset: 0,
            size: q.bytes,
        };
        self.record(
            pass,
            &pipeline,
            &layout,
            &[Bind::span(x_buffer, x), out],
            bytemuck::bytes_of(&p),
            (q.grid.0, q.grid.1, 1),
        )
    }

    /// Records a row gather: `out[i] = W[ids[i]]` as `dtype` values.
    pub fn get_rows(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        job: &GetRowsJob<'_>,
    ) -> Result<()> {
        self.set.check()?;
        let set = self.set.clone();
        let t = job.weight;
        let call = GetRowsCall {
            weight: t.layout(),
            dtype: job.dtype,
            n_ids: job.n_ids as u64,
            ids: extent(&job.ids, "ids")?,
            out: Extent {
                offset: job.out.offset,
                len: job.out.buffer.size(),
            },
        };
        let plan = plan_get_rows(&set.plan, &call)?;
        if plan.windows.is_empty() {
            return Ok(());
        }
        let (pipeline, layout) = set.pipeline(&plan.key)?;
        for win in &plan.windows {
            let out = Bind {
                buffer: job.out.buffer,
                offset: win.out.0,
                size: win.out.1,
            };
            for d in &win.dispatches {
                let run = &plan.runs[d.run];
                let binds = operands(&plan.key, |b| match b {
                    Buf::W => Some(Bind {
                        buffer: &t.parts[run.part].buffer,
                        offset: run.offset,
                        size: run.size,
                    }),
                    Buf::Y => Some(out),
                    Buf::Ids => Some(Bind::span(job.ids.buffer, win.ids)),
                    Buf::Grids => Some(grids(&set.tables)),
                    Buf::WV | Buf::X | Buf::XV => None,
                })?;
                let grid = (win.grid.0, win.grid.1, 1);
                self.record(
                    pass,
                    &pipeline,
                    &layout,
                    &binds,
                    bytemuck::bytes_of(&d.params),
                    grid,
                )?;
            }
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
        let t = job.weight;
        let call = MatVecIdCall {
            weight: t.layout(),
            tokens: job.tokens as u64,
            slots: job.slots as u64,
            x_per_slot: job.x_per_slot,
            x: extent(&job.x, "x")?,
            ids: extent(&job.ids, "ids")?,
            y: extent(&job.y, "y")?,
        };
        let plan = plan_matvec_id(&set.plan, &call)?;
        if plan.windows.is_empty() {
            return Ok(());
        }
        let (pipeline, layout) = set.pipeline(&plan.key)?;
        for win in &plan.windows {
            for (i, p) in &win.dispatches {
                let run = &plan.runs[*i];
                let binds = operands(&plan.key, |b| match b {
                    Buf::W | Buf::WV => Some(Bind {
                        buffer: &t.parts[run.part].buffer,
                        offset: run.offset,
                        size: run.size,
                    }),
                    Buf::X | Buf::XV => Some(Bind::span(job.x.buffer, plan.x)),
                    Buf::Y => Some(Bind::span(job.y.buffer, win.y)),
                    Buf::Ids => Some(Bind::span(job.ids.buffer, win.ids)),
                    Buf::Grids => Some(grids(&set.tables)),
                })?;
                self.record(
                    pass,
                    &pipeline,
                    &layout,
                    &binds,
                    bytemuck::bytes_of(p),
                    win.grid,
                )?;
            }
        }
        Ok(())
    }
}

/// What the integer path's scratch buffer holds after a quantiser: the codes, scales and sums of
/// codes of the `blocks` blocks of span `span` of buffer `x`.
#[derive(PartialEq)]
struct Quantized {
    x: wgpu::Buffer,
    span: Span,
    blocks: u64,
    scratch: wgpu::Buffer,
}

/// The grids binding: the engine's tables buffer, whole.
fn grids(tables: &wgpu::Buffer) -> Bind<'_> {
    Bind {
        buffer: tables,
        offset: 0,
        size: tables.size(),
    }
}

/// The buffers of `key`'s bindings in binding order (its layout's), from `of` (what a binding
/// holds → its buffer run).
fn operands<'a>(key: &KernelKey, of: impl Fn(Buf) -> Option<Bind<'a>>) -> Result<Vec<Bind<'a>>> {
    key.bindings()
        .map(|b| {
            of(b.buf).ok_or_else(|| {
                GpuError::Invariant(format!("{key}: no buffer for its {:?} binding", b.buf)).into()
            })
        })
        .collect()
}

//! Our kernels' calls as dispatches of a [`Recorder`]: each call checked and planned (the
//! weight's runs of whole rows per binding, the operands' spans, column groups, grids), then one
//! recorded dispatch per run.

use super::params::{GetRowsParams, MatVecParams, QuantizeParams};
use super::plan::{
    aligned_rows, extent, invalid, plan_mul, shape, span, tensor_runs, MulCall, MulOp,
    QuantizePlan, Span,
};
use super::record::Bind;
use super::{
    binding, GetRowsJob, KernelKey, Mapping, MatVecIdJob, MulMatJob, Recorder, GET_ROWS_VALUES,
    WORKGROUP_SIZE,
};
use crate::gpu::kernels::layout::Layout;
use crate::gpu::{windows, GpuError};
use crate::Result;

impl Recorder {
    /// Records `Y = W X` for 1 to [`MATVEC_MAX_BATCH`](super::MATVEC_MAX_BATCH) columns.
    pub fn matvec(&mut self, pass: &mut wgpu::ComputePass<'_>, job: &MulMatJob<'_>) -> Result<()> {
        self.mul(pass, job, MulOp::MatVec(None))
    }

    /// [`Recorder::matvec`] on `mapping` whatever the policy would choose (the tuner times the
    /// candidates with it).
    pub(crate) fn matvec_mapped(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        job: &MulMatJob<'_>,
        mapping: Mapping,
    ) -> Result<()> {
        self.mul(pass, job, MulOp::MatVec(Some(mapping)))
    }

    /// Records `Y = W X` for any number of columns: tiled through workgroup memory, or on CPU
    /// adapters (one invocation per matvec row) as matvecs of up to
    /// [`MATMUL_CPU_COLUMNS`](super::MATMUL_CPU_COLUMNS) columns, one invocation per row decoding
    /// each chunk once for all of them (measured faster there: no barriers, no workgroup-memory
    /// round trip).
    pub fn matmul(&mut self, pass: &mut wgpu::ComputePass<'_>, job: &MulMatJob<'_>) -> Result<()> {
        self.mul(pass, job, MulOp::MatMul)
    }

    /// Plans the product ([`plan_mul`]) and records its dispatches.
    fn mul(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        job: &MulMatJob<'_>,
        op: MulOp,
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
                    self.quantize(pass, job.x.buffer, group.x, &b, q)?;
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
                let binds = operands(&layout, |b| match b {
                    binding::W | binding::WV => Some(Bind {
                        buffer: w,
                        offset: run.offset,
                        size: run.size,
                    }),
                    binding::X | binding::XV => Some(x),
                    binding::Y => Some(Bind::span(job.y.buffer, d.y)),
                    binding::GRIDS => Some(grids(&set.tables)),
                    _ => None,
                })?;
                self.record(pass, &pipeline, &layout, &binds, d.params.bytes(), d.grid)?;
            }
        }
        Ok(())
    }

    /// Records the integer path's quantiser `q`: the values of span `x` of `x_buffer` (whole
    /// blocks of 32) as int8 codes from word 0 of `scratch`, then one scale per block.
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
            pad: 0,
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
        let runs = tensor_runs(&plan, t, &s, u64::MAX)?;
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
                        buffer: &t.parts[run.part].buffer,
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
        let runs = tensor_runs(&plan, t, &s, u64::MAX)?;
        let vec_x = s.k.is_multiple_of(4) && x.skip.is_multiple_of(4);
        let key = KernelKey::matvec_id(s.format, plan.threads, vec_x)
            .with_vec_w(aligned_rows(&s, &runs))
            .with_subgroups(plan.subgroups)
            .with_x_lanes(plan.x_lanes)
            .with_unroll(plan.unroll);
        let (pipeline, layout) = set.pipeline(&key)?;
        let (gx, gy) = windows::grid(n.div_ceil(rows_per_group), plan.max_dim);
        let mut p0 = 0;
        while p0 < pairs {
            let np = per.min(pairs - p0);
            let ids = span(&job.ids, p0, np, align, "ids")?;
            let y = span(&job.y, p0 * n, np * n, align, "y")?;
            for run in &runs {
                let binds = operands(&layout, |b| match b {
                    binding::W | binding::WV => Some(Bind {
                        buffer: &t.parts[run.part].buffer,
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

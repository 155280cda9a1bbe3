//! The matvec_id family: ggml's `MUL_MAT_ID`, per token and slot the rows of the expert its id
//! names (`shaders/kernels/matvec.wgsl` with the expert ids; its WGSL is the classic matvec's,
//! `super::matvec::source`). Its key and its dispatch plan.

use super::super::params::MatVecParams;
use super::super::plan::{
    aligned_rows, invalid, row_runs, span_of, Extent, Plan, RowRun, Shape, Span, WeightLayout,
};
use super::super::{Buf, KernelKey, StorageBinding, Variant, MATVEC_THREADS, WORKGROUP_SIZE};
use super::matvec::{self, push_matvec, MatVec};
use crate::gpu::{windows, GpuError};
use crate::{Format, Result};

/// matvec_id's group-0 bindings: matvec's ([`matvec::BINDINGS`], the same WGSL) and the ids
/// (`shaders/kernels/matvec.wgsl`'s `ids`), in binding order.
pub const BINDINGS: &[StorageBinding] = {
    let m = matvec::BINDINGS;
    &[
        m[0],
        m[1],
        m[2],
        StorageBinding::read(Buf::Ids, 3, 4),
        m[3],
        m[4],
        m[5],
    ]
};

impl KernelKey {
    /// matvec_id, `threads` invocations per row.
    pub const fn matvec_id(format: Format, threads: u32, vec_x: bool) -> KernelKey {
        KernelKey {
            format,
            variant: Variant::MatVecId(MatVec::classic(1, threads, vec_x)),
        }
    }
}

/// The matvec_id variants of `format`: every entry of [`MATVEC_THREADS`], scalar and vec4 x,
/// and each one's readers, reductions and loops as matvec's classic mapping has them, each also
/// converting binary16 by the device where the format reads it.
pub(in crate::gpu::kernels) fn keys(format: Format) -> Vec<KernelKey> {
    let mut out = Vec::new();
    for t in MATVEC_THREADS {
        for v in [false, true] {
            push_matvec(&mut out, KernelKey::matvec_id(format, t, v));
        }
    }
    super::matvec::with_hw_f16(out)
}

/// One `MUL_MAT_ID` to plan (see `MatVecIdJob`).
#[derive(Clone, Debug)]
pub struct MatVecIdCall<'a> {
    /// The experts' weights, `[K, N, E]`.
    pub weight: WeightLayout<'a>,
    /// Tokens.
    pub tokens: u64,
    /// Experts per token.
    pub slots: u64,
    /// One row of x per (token, slot) rather than per token.
    pub x_per_slot: bool,
    /// The f32 inputs.
    pub x: Extent,
    /// The u32 expert ids, `tokens × slots`.
    pub ids: Extent,
    /// The f32 outputs, `tokens × slots × N`.
    pub y: Extent,
}

/// The (token, slot) pairs one set of dispatches covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatVecIdWindow {
    /// The span of ids bound.
    pub ids: Span,
    /// The span of Y bound.
    pub y: Span,
    /// Workgroups in x, y and z (one z per pair).
    pub grid: (u32, u32, u32),
    /// One dispatch per run of weight rows: the run and its parameters.
    pub dispatches: Vec<(usize, MatVecParams)>,
}

/// Every dispatch of one `MUL_MAT_ID`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatVecIdPlan {
    /// The weight's shape (rows: N · E).
    pub shape: Shape,
    /// Its runs of rows.
    pub runs: Vec<RowRun>,
    /// The kernel.
    pub key: KernelKey,
    /// The span of X bound (all of it, in one binding).
    pub x: Span,
    /// The windows of pairs, in order (none for no pairs).
    pub windows: Vec<MatVecIdWindow>,
}

/// Plans `call` on `plan`.
pub fn plan_matvec_id(plan: &Plan, call: &MatVecIdCall<'_>) -> Result<MatVecIdPlan> {
    plan.check()?;
    let w = &call.weight;
    let s = Shape::of(w)?;
    let n = w.dims.get(1).copied().unwrap_or(1);
    let experts = s.rows / n.max(1);
    if n == 0 || experts * n != s.rows || experts > u32::MAX as u64 {
        return Err(invalid(format!(
            "{}: dims {:?} are not [K, N, E]",
            w.name, w.dims
        )));
    }
    if call.slots == 0 {
        return Err(invalid("matvec_id needs at least one slot".into()));
    }
    let pairs = call.tokens.saturating_mul(call.slots);
    if pairs == 0 {
        return Ok(MatVecIdPlan {
            shape: s,
            runs: Vec::new(),
            key: KernelKey::matvec_id(s.format, plan.matvec.threads, false),
            x: Span {
                offset: 0,
                size: 0,
                skip: 0,
            },
            windows: Vec::new(),
        });
    }
    if pairs > u32::MAX as u64 || call.slots > u32::MAX as u64 {
        return Err(invalid(format!(
            "matvec_id takes at most {} (token, slot) pairs, not {pairs}",
            u32::MAX
        )));
    }
    let align = plan.align;
    let x_rows = if call.x_per_slot { pairs } else { call.tokens };
    let x = span_of(call.x, 0, x_rows.saturating_mul(s.k), align, "x")?;
    if x.size > plan.max_binding {
        return Err(GpuError::TooLarge {
            what: "matvec_id inputs in one storage binding".into(),
            bytes: x.size,
            limit: plan.max_binding,
        }
        .into());
    }
    span_of(call.ids, 0, pairs, align, "ids")?;
    span_of(call.y, 0, pairs.saturating_mul(n), align, "y")?;
    let room = plan.max_binding.saturating_sub(align);
    let per = (room / n.saturating_mul(4)).min(plan.max_dim);
    let rows_per_group = (WORKGROUP_SIZE / plan.matvec.threads) as u64;
    if per == 0 || n.div_ceil(rows_per_group) > plan.max_dim.saturating_mul(plan.max_dim) {
        return Err(GpuError::TooLarge {
            what: format!("one expert's outputs of {} in a storage binding", w.name),
            bytes: n.saturating_mul(4),
            limit: plan.max_binding,
        }
        .into());
    }
    let runs = row_runs(plan, w, &s, u64::MAX)?;
    let vec_x = s.k.is_multiple_of(4) && x.skip.is_multiple_of(4);
    let key = plan
        .matvec
        .matvec_id_key(s.format, vec_x, aligned_rows(&s, &runs));
    let (gx, gy) = windows::grid(n.div_ceil(rows_per_group), plan.max_dim);
    let mut windows = Vec::new();
    let mut p0 = 0;
    while p0 < pairs {
        let np = per.min(pairs - p0);
        let ids = span_of(call.ids, p0, np, align, "ids")?;
        let y = span_of(call.y, p0 * n, np * n, align, "y")?;
        let dispatches = runs
            .iter()
            .enumerate()
            .map(|(i, run)| {
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
                    slots: call.slots as u32,
                    x_per_slot: u32::from(call.x_per_slot),
                    pair_first: p0 as u32,
                    ids_skip: ids.skip,
                };
                (i, p)
            })
            .collect();
        windows.push(MatVecIdWindow {
            ids,
            y,
            grid: (gx, gy, np as u32),
            dispatches,
        });
        p0 += np;
    }
    Ok(MatVecIdPlan {
        shape: s,
        runs,
        key,
        x,
        windows,
    })
}

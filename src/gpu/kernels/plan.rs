//! Planning, without wgpu: the limits and choices a recording plans with ([`Plan`]), the policy
//! that picks each product's variant ([`Plan::matvec_choice`]), a weight's shape and its runs of
//! whole rows that each fit one storage binding, checked spans of the operands, and every
//! dispatch of a product ([`plan_mul`]) with its kernel, bindings, parameters and grid. The
//! recorder only executes these plans, so they are tested without a GPU and fuzzed
//! (`fuzz/fuzz_targets/kernel_plan.rs`).

use std::ops::Range;

use super::params::{GetRowsParams, MatMulParams, MatVecParams};
use super::{
    KernelKey, Mapping, Op, Precision, RowsShape, GET_ROWS_VALUES, MATMUL_CPU_COLUMNS, MATMUL_TILE,
    MATVEC_MAX_BATCH, WORKGROUP_SIZE,
};
use crate::gpu::{windows, GpuError};
use crate::{DType, Error, Format, Result};

pub(crate) fn invalid(m: String) -> Error {
    GpuError::InvalidJob(m).into()
}

/// The limits and choices every recording of one engine plans with: the device's limits in use
/// and the variant settings of [`crate::gpu::EngineOptions`] as the adapter allows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `min_storage_buffer_offset_alignment` (a power of two).
    pub align: u64,
    /// `min_uniform_buffer_offset_alignment`.
    pub uniform_align: u64,
    /// The storage-binding size in use.
    pub max_binding: u64,
    /// Workgroups per grid dimension in use.
    pub max_dim: u64,
    /// Invocations per matvec row on the classic mapping (1: CPU adapters).
    pub threads: u32,
    /// Whether the classic mapping's rows reduce through subgroup shuffles
    /// ([`KernelKey::subgroups`]).
    pub subgroups: bool,
    /// The lanes sharing each read of x with one invocation per row ([`KernelKey::x_lanes`];
    /// 1: none).
    pub x_lanes: u32,
    /// The precision products were asked to sum in; each gets it where a kernel honours it
    /// ([`Precision::honoured`]).
    pub precision: Precision,
    /// Whether matvec rows of several invocations are unrolled ([`KernelKey::unroll`]).
    pub unroll: bool,
    /// matvec on the rows mapping in this shape by default; `None`: the classic mapping.
    pub rows: Option<RowsShape>,
    /// Whether the rows mapping reduces through subgroup shuffles.
    pub rows_subgroups: bool,
}

/// What a matvec mapping is chosen by: the weight's format, K, N (all its rows) and the columns
/// of one dispatch.
pub type MappingKey = (Format, u64, u64, u32);

impl Plan {
    /// Checks the limits as a device reports them: the alignment a power of two of at least 4,
    /// a binding of at most 4 GiB, 1 to `u32::MAX` workgroups per dimension.
    pub fn check(&self) -> Result<()> {
        let ok = self.align.is_power_of_two()
            && self.align >= 4
            && self.max_binding <= u32::MAX as u64
            && (1..=u32::MAX as u64).contains(&self.max_dim);
        if ok {
            Ok(())
        } else {
            Err(GpuError::Invariant(format!(
                "kernel limits out of range: alignment {}, binding {} bytes, {} workgroups per dimension",
                self.align, self.max_binding, self.max_dim
            ))
            .into())
        }
    }

    /// The mapping of calls the tuner made no choice for.
    pub fn default_mapping(&self) -> Mapping {
        self.rows.map_or(Mapping::Classic, Mapping::Rows)
    }

    /// The policy: the mapping and precision one matvec dispatch of `columns` columns on a weight
    /// of `format` with `k` values per row runs in, asked for `asked` (the tuner's choice, a
    /// forced variant or [`Plan::default_mapping`]). The precision is the plan's where a kernel
    /// honours it, else `exact`; the integer path and more than [`MATVEC_MAX_BATCH`] columns
    /// (matmul's matvecs on CPU adapters) run on the classic mapping.
    pub fn matvec_choice(
        &self,
        format: Format,
        k: u64,
        columns: u64,
        asked: Mapping,
    ) -> (Mapping, Precision) {
        let precision = self.precision.honoured(Op::MatVec, format, k);
        let classic = precision == Precision::Int8 || columns > MATVEC_MAX_BATCH as u64;
        let mapping = if classic { Mapping::Classic } else { asked };
        (mapping, precision)
    }

    /// The matvec kernel of `columns` columns of `format` on `mapping` summing in `precision`
    /// where it can ([`KernelKey::with_precision`]), with this plan's reductions, shared x and
    /// unrolling; `None` for a rows shape that is no variant at that many columns.
    pub fn matvec_key(
        &self,
        format: Format,
        columns: u32,
        (vec_x, vec_w): (bool, bool),
        precision: Precision,
        mapping: Mapping,
    ) -> Option<KernelKey> {
        Some(match mapping {
            Mapping::Rows(shape) => {
                let r = shape.rows_for(columns);
                KernelKey::matvec_rows(format, columns, shape.workgroup, r, vec_x)?
                    .with_vec_w(vec_w)
                    .with_subgroups(self.rows_subgroups)
                    .with_precision(precision)
                    .with_unroll(self.unroll)
            }
            Mapping::Classic => KernelKey::matvec(format, columns, self.threads, vec_x)
                .with_vec_w(vec_w)
                .with_subgroups(self.subgroups)
                .with_x_lanes(self.x_lanes)
                .with_precision(precision)
                .with_unroll(self.unroll),
        })
    }
}

/// One buffer of a weight as the planner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartLayout {
    /// The bytes of the buffer that hold the part's data.
    pub range: Range<u64>,
    /// The weight's elements the part holds.
    pub elements: Range<u64>,
    /// The buffer's size in bytes.
    pub buffer_len: u64,
}

/// A resident weight as the planner sees it: its type, dims and where its parts lie, without
/// the buffers (`ResidentTensor::layout`).
#[derive(Clone, Debug)]
pub struct WeightLayout<'a> {
    /// The tensor's name, for errors.
    pub name: &'a str,
    /// Its ggml type in the file.
    pub format: Format,
    /// Dimensions in ggml order.
    pub dims: &'a [u64],
    /// Number of elements.
    pub n_elements: u64,
    /// The resident element type: `None` for raw blocks.
    pub dtype: Option<DType>,
    /// The parts, in element order.
    pub parts: Vec<PartLayout>,
}

/// Where a run of a weight's elements lies: [`WeightLayout::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartBinding {
    /// The part (index into the weight's parts).
    pub part: usize,
    /// Byte offset of the binding in the part's buffer (a multiple of the alignment).
    pub offset: u64,
    /// Bytes bound (a multiple of 4, within the buffer).
    pub size: u64,
    /// Bytes from the binding's start to the run's first element.
    pub skip_bytes: u64,
    /// The same in elements, for dequantised tensors.
    pub skip_elements: Option<u64>,
}

impl WeightLayout<'_> {
    /// Where `elements` (a run inside one part; for raw tensors starting on a block boundary)
    /// lie, bound from an offset that is a multiple of `align` (a power of two).
    pub fn bind(&self, elements: Range<u64>, align: u64) -> Result<PartBinding> {
        if elements.start >= elements.end || elements.end > self.n_elements {
            return Err(invalid(format!(
                "{}: elements {elements:?} are not a non-empty run of its {} elements",
                self.name, self.n_elements
            )));
        }
        if !align.is_power_of_two() {
            return Err(invalid(format!("alignment {align} is not a power of two")));
        }
        let (index, part) = self
            .parts
            .iter()
            .enumerate()
            .find(|(_, p)| p.elements.contains(&elements.start))
            .ok_or_else(|| invalid(format!("{}: no part holds {elements:?}", self.name)))?;
        if elements.end > part.elements.end {
            return Err(invalid(format!(
                "{}: elements {elements:?} cross the boundary of part {index} ({:?})",
                self.name, part.elements
            )));
        }
        // Bytes from the part's first element to the run's start and end.
        let (start, end) = match self.dtype {
            Some(d) => {
                let size = d.size() as u64;
                let first = elements.start - part.elements.start;
                (first * size, (elements.end - part.elements.start) * size)
            }
            None => {
                let (elems, bytes) = (
                    self.format.block_elems() as u64,
                    self.format.block_bytes() as u64,
                );
                if !elements.start.is_multiple_of(elems) {
                    return Err(invalid(format!(
                        "{}: raw elements must start on a {elems}-value block, not at {}",
                        self.name, elements.start
                    )));
                }
                let first = (elements.start - part.elements.start) / elems;
                let last = (elements.end - part.elements.start).div_ceil(elems);
                (first * bytes, last * bytes)
            }
        };
        let start = part.range.start + start;
        let offset = start / align * align;
        let size = (part.range.start + end - offset).next_multiple_of(4);
        Ok(PartBinding {
            part: index,
            offset,
            size: size.min(part.buffer_len.saturating_sub(offset)),
            skip_bytes: start - offset,
            skip_elements: self.dtype.map(|d| (start - offset) / d.size() as u64),
        })
    }
}

/// A weight's shape as the kernels see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The format the kernels decode: the tensor's own, or its resident dtype's.
    pub format: Format,
    /// Values per row.
    pub k: u64,
    /// Rows.
    pub rows: u64,
    /// Bytes per row.
    pub row_bytes: u64,
}

impl Shape {
    /// `w` as rows of `dims[0]` values of a format with a shader, each row at most `u32` bytes.
    pub fn of(w: &WeightLayout<'_>) -> Result<Shape> {
        let format = match w.dtype {
            None => w.format,
            Some(DType::F32) => Format::F32,
            Some(DType::F16) => Format::F16,
            Some(DType::BF16) => Format::BF16,
        };
        let k = w.dims.first().copied().unwrap_or(0);
        if !format.has_shader() {
            return Err(invalid(format!(
                "{}: {format} has no shader (multiply it on the CPU with ops)",
                w.name
            )));
        }
        if k == 0 || w.n_elements == 0 || !w.n_elements.is_multiple_of(k) {
            return Err(invalid(format!(
                "{}: dims {:?} are not rows of K values",
                w.name, w.dims
            )));
        }
        let elems = format.block_elems() as u64;
        if !k.is_multiple_of(elems) {
            return Err(invalid(format!(
                "{}: K = {k} is not a multiple of the {elems}-value {format} block",
                w.name
            )));
        }
        let row_bytes = k / elems * format.block_bytes() as u64;
        if k > u32::MAX as u64 / 8 || row_bytes > u32::MAX as u64 {
            return Err(invalid(format!(
                "{}: rows of {k} values are too long",
                w.name
            )));
        }
        Ok(Shape {
            format,
            k,
            rows: w.n_elements / k,
            row_bytes,
        })
    }
}

/// One dispatch's run of whole weight rows inside one binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowRun {
    /// The part whose buffer is bound.
    pub part: usize,
    /// Byte offset of the binding.
    pub offset: u64,
    /// Bytes bound.
    pub size: u64,
    /// Bytes from the binding's start to row `first`.
    pub skip: u64,
    /// The run's first row.
    pub first: u64,
    /// Rows in the run.
    pub count: u64,
}

/// Rows per run: as many whole rows of `row_bytes` as one binding of `max_binding` bytes holds
/// from any aligned offset, at most `max_rows`; `None` when not even one row fits.
pub(crate) fn rows_per_run(plan: &Plan, row_bytes: u64, max_rows: u64) -> Option<u64> {
    let fit = plan.max_binding.saturating_sub(plan.align + 4) / row_bytes;
    (fit > 0).then(|| fit.min(max_rows).max(1))
}

/// The runs of whole rows of `w` (shape `s`), each inside one binding and at most `max_rows`
/// rows.
pub fn row_runs(
    plan: &Plan,
    w: &WeightLayout<'_>,
    s: &Shape,
    max_rows: u64,
) -> Result<Vec<RowRun>> {
    let per = rows_per_run(plan, s.row_bytes, max_rows).ok_or_else(|| GpuError::TooLarge {
        what: format!(
            "one row of {} ({} bytes) in a storage binding",
            w.name, s.row_bytes
        ),
        bytes: s.row_bytes + plan.align,
        limit: plan.max_binding,
    })?;
    let mut runs = Vec::new();
    for p in &w.parts {
        let (first, end) = (p.elements.start / s.k, p.elements.end.div_ceil(s.k));
        if !p.elements.start.is_multiple_of(s.k)
            || (!p.elements.end.is_multiple_of(s.k) && p.elements.end != w.n_elements)
        {
            return Err(invalid(format!(
                "{}: a buffer boundary at element {} splits a row of {} values",
                w.name, p.elements.start, s.k
            )));
        }
        let mut r = first;
        while r < end {
            let n = per.min(end - r);
            let b = w.bind(r * s.k..(r + n) * s.k, plan.align)?;
            runs.push(RowRun {
                part: b.part,
                offset: b.offset,
                size: b.size,
                skip: b.skip_bytes,
                first: r,
                count: n,
            });
            r += n;
        }
    }
    Ok(runs)
}

/// Whether every row of every run starts on a 16-byte boundary of its binding and is whole
/// 16-byte chunks: the weight can be read four words per load ([`KernelKey::vec_w`]).
pub(crate) fn aligned_rows(s: &Shape, runs: &[RowRun]) -> bool {
    s.row_bytes.is_multiple_of(16) && runs.iter().all(|r| r.skip.is_multiple_of(16))
}

/// An operand buffer as the planner sees it: the byte offset of its first element and the
/// buffer's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Byte offset of the first element.
    pub offset: u64,
    /// The buffer's size in bytes.
    pub len: u64,
}

/// A checked run of `count` 4-byte elements of an operand from element `first`, bound from an
/// offset that is a multiple of `align`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the binding.
    pub offset: u64,
    /// Bytes bound.
    pub size: u64,
    /// Elements from the binding's start to element `first`.
    pub skip: u32,
}

/// The [`Span`] of elements `first .. first + count` of operand `e`; errors name `what`.
pub(crate) fn span_of(e: Extent, first: u64, count: u64, align: u64, what: &str) -> Result<Span> {
    if !e.offset.is_multiple_of(4) {
        return Err(invalid(format!(
            "{what}: offset {} is not a multiple of 4",
            e.offset
        )));
    }
    span_in(e.offset, e.len, first, count, align).ok_or_else(|| {
        invalid(format!(
            "{what}: {count} values from byte {} pass the buffer's {} bytes",
            e.offset.saturating_add(first.saturating_mul(4)),
            e.len
        ))
    })
}

/// The arithmetic of [`span_of`]: elements `first .. first + count` from byte `offset` of a
/// buffer of `len` bytes, or `None` when they pass its end.
pub(crate) fn span_in(offset: u64, len: u64, first: u64, count: u64, align: u64) -> Option<Span> {
    let start = offset.checked_add(first.checked_mul(4)?)?;
    let end = start.checked_add(count.checked_mul(4)?)?;
    if end > len {
        return None;
    }
    let bound = start / align * align;
    Some(Span {
        offset: bound,
        size: end - bound,
        skip: u32::try_from((start - bound) / 4).ok()?,
    })
}

/// Which product a [`MulCall`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MulOp {
    /// 1 to [`MATVEC_MAX_BATCH`] columns, on the given mapping or the policy's.
    MatVec(Option<Mapping>),
    /// Any number of columns: tiled, or on CPU adapters (one invocation per row) as matvecs of
    /// up to [`MATMUL_CPU_COLUMNS`] columns.
    MatMul,
}

/// One product `Y = W X` to plan.
#[derive(Clone, Debug)]
pub struct MulCall<'a> {
    /// The weight.
    pub weight: WeightLayout<'a>,
    /// Columns of X and Y.
    pub batch: u64,
    /// X, `batch × K` f32.
    pub x: Extent,
    /// Y, `batch × N` f32.
    pub y: Extent,
    /// The product.
    pub op: MulOp,
}

/// One kernel's uniform parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MulParams {
    /// A matvec dispatch's.
    MatVec(MatVecParams),
    /// A tiled matmul dispatch's.
    MatMul(MatMulParams),
}

impl MulParams {
    /// The bytes the uniform holds.
    pub fn bytes(&self) -> &[u8] {
        match self {
            MulParams::MatVec(p) => bytemuck::bytes_of(p),
            MulParams::MatMul(p) => bytemuck::bytes_of(p),
        }
    }
}

/// One dispatch of a [`ColumnGroup`]: one run of weight rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulDispatch {
    /// The run ([`MulPlan::runs`]) bound as the weight.
    pub run: usize,
    /// The span of Y bound.
    pub y: Span,
    /// The parameters.
    pub params: MulParams,
    /// Workgroups in x, y and z.
    pub grid: (u32, u32, u32),
}

/// The integer path's quantiser of one column group: x's int8 codes (word 0 on) and then one
/// scale per 32 values, in a scratch buffer of `bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantizePlan {
    /// Blocks of 32 values.
    pub blocks: u64,
    /// Bytes of the scratch buffer used.
    pub bytes: u64,
    /// Workgroups in x and y.
    pub grid: (u32, u32),
}

/// The columns one kernel covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnGroup {
    /// The first column.
    pub first: u64,
    /// Columns.
    pub columns: u64,
    /// The kernel.
    pub key: KernelKey,
    /// The variant the policy picked (matmul's tiled kernel: [`Mapping::Classic`]).
    pub mapping: Mapping,
    /// The span of X bound (on the integer path: the quantiser's input).
    pub x: Span,
    /// The quantiser to run first (precision `int8`).
    pub quantize: Option<QuantizePlan>,
    /// One dispatch per run of rows.
    pub dispatches: Vec<MulDispatch>,
}

/// Every dispatch of one product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MulPlan {
    /// The weight's shape.
    pub shape: Shape,
    /// Its runs of rows.
    pub runs: Vec<RowRun>,
    /// The precision the products sum in.
    pub precision: Precision,
    /// The kernels, in column order.
    pub groups: Vec<ColumnGroup>,
}

/// Plans `call` on `plan`: `tuned` gives the mapping the tuner chose for a [`MappingKey`] (else
/// [`Plan::default_mapping`]). Checks everything the kernels rely on: shapes, operand spans,
/// binding sizes and grid limits; every count in the parameters and the grid fits `u32`.
pub fn plan_mul(
    plan: &Plan,
    call: &MulCall<'_>,
    tuned: &dyn Fn(MappingKey) -> Mapping,
) -> Result<MulPlan> {
    let (tiled, matvec_cols, forced) = match call.op {
        MulOp::MatVec(forced) => {
            if call.batch == 0 || call.batch > MATVEC_MAX_BATCH as u64 {
                return Err(invalid(format!(
                    "matvec takes 1 to {MATVEC_MAX_BATCH} columns, not {} (use matmul)",
                    call.batch
                )));
            }
            (false, MATVEC_MAX_BATCH as u64, forced)
        }
        MulOp::MatMul => {
            if call.batch == 0 {
                return Err(invalid("matmul needs at least one column".into()));
            }
            (plan.threads > 1, MATMUL_CPU_COLUMNS as u64, None)
        }
    };
    let w = &call.weight;
    let s = Shape::of(w)?;
    let align = plan.align;
    let batch = call.batch;
    let tile = MATMUL_TILE as u64;
    // Columns per dispatch: X and Y spans within a binding.
    let room = plan.max_binding.saturating_sub(align);
    let max_cols = if tiled {
        plan.max_dim.saturating_mul(tile)
    } else {
        matvec_cols
    };
    let precision = if tiled {
        Precision::Exact
    } else {
        plan.precision.honoured(Op::MatVec, s.format, s.k)
    };
    // The integer path's codes and scales (36 bytes per 32 values) fit a binding too, and the
    // quantiser's workgroups (one value block per invocation) a grid.
    let max_codes = if precision == Precision::Int8 {
        let grid = plan.max_dim.saturating_mul(plan.max_dim);
        (room / 36 * 32 / s.k).min(grid.saturating_mul(WORKGROUP_SIZE as u64 * 32) / s.k)
    } else {
        u64::MAX
    };
    let per_cols = (room / (s.k * 4))
        .min(room / s.rows.saturating_mul(4))
        .min(max_cols)
        .min(max_codes);
    if per_cols == 0 {
        return Err(GpuError::TooLarge {
            what: format!("one column of {} in a storage binding", w.name),
            bytes: s.k.max(s.rows).saturating_mul(4).saturating_add(align),
            limit: plan.max_binding,
        }
        .into());
    }
    span_of(call.x, 0, batch.saturating_mul(s.k), align, "x")?;
    span_of(call.y, 0, batch.saturating_mul(s.rows), align, "y")?;
    let max_rows = if tiled {
        plan.max_dim.saturating_mul(tile)
    } else {
        plan.max_dim.saturating_mul(plan.max_dim)
    };
    let runs = row_runs(plan, w, &s, max_rows)?;
    let vec_w = !tiled && aligned_rows(&s, &runs);
    let mut groups = Vec::new();
    let mut c0 = 0;
    while c0 < batch {
        let cols = per_cols.min(batch - c0);
        let x = span_of(call.x, c0 * s.k, cols * s.k, align, "x")?;
        let vec_x = !tiled && s.k.is_multiple_of(4) && x.skip.is_multiple_of(4);
        let (key, mapping) = if tiled {
            (KernelKey::matmul(s.format), Mapping::Classic)
        } else {
            let asked = forced.unwrap_or_else(|| tuned((s.format, s.k, s.rows, cols as u32)));
            let (mapping, precision) = plan.matvec_choice(s.format, s.k, cols, asked);
            let key = plan
                .matvec_key(s.format, cols as u32, (vec_x, vec_w), precision, mapping)
                .ok_or_else(|| invalid(format!("matvec {mapping} at {cols} columns")))?;
            (key, mapping)
        };
        let quantize = (key.precision == Precision::Int8).then(|| {
            let blocks = cols * s.k / 32;
            QuantizePlan {
                blocks,
                bytes: blocks * 36,
                grid: windows::grid(blocks.div_ceil(WORKGROUP_SIZE as u64), plan.max_dim),
            }
        });
        let rows_per_group = key.rows_per_group() as u64;
        let mut dispatches = Vec::with_capacity(runs.len());
        for (i, run) in runs.iter().enumerate() {
            let y_first = c0 * s.rows + run.first;
            let y = span_of(call.y, y_first, (cols - 1) * s.rows + run.count, align, "y")?;
            let (params, grid) = if tiled {
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
                (MulParams::MatMul(p), groups)
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
                (MulParams::MatVec(p), (gx, gy, 1))
            };
            dispatches.push(MulDispatch {
                run: i,
                y,
                params,
                grid,
            });
        }
        groups.push(ColumnGroup {
            first: c0,
            columns: cols,
            key,
            mapping,
            x,
            quantize,
            dispatches,
        });
        c0 += cols;
    }
    Ok(MulPlan {
        shape: s,
        runs,
        precision,
        groups,
    })
}

/// One row gather `out[i] = W[ids[i]]` to plan.
#[derive(Clone, Debug)]
pub struct GetRowsCall<'a> {
    /// The table.
    pub weight: WeightLayout<'a>,
    /// The output dtype.
    pub dtype: DType,
    /// Rows to gather.
    pub n_ids: u64,
    /// The u32 ids.
    pub ids: Extent,
    /// The output: `n_ids × K` values of `dtype` (the buffer to the next multiple of 16 bytes).
    pub out: Extent,
}

/// One dispatch of a window of ids: one run of table rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetRowsDispatch {
    /// The run ([`GetRowsPlan::runs`]) bound as the table.
    pub run: usize,
    /// The parameters.
    pub params: GetRowsParams,
}

/// The ids one set of dispatches gathers, and where their rows go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetRowsWindow {
    /// The span of ids bound.
    pub ids: Span,
    /// Byte offset and size of the output bound.
    pub out: (u64, u64),
    /// Workgroups in x and y.
    pub grid: (u32, u32),
    /// One dispatch per run of table rows (each writes the ids that fall in its run).
    pub dispatches: Vec<GetRowsDispatch>,
}

/// Every dispatch of one row gather.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetRowsPlan {
    /// The table's shape.
    pub shape: Shape,
    /// Its runs of rows.
    pub runs: Vec<RowRun>,
    /// The kernel.
    pub key: KernelKey,
    /// The windows of ids, in order (none for no ids).
    pub windows: Vec<GetRowsWindow>,
}

/// Plans `call` on `plan`: output windows on aligned offsets within a binding, their groups of
/// [`GET_ROWS_VALUES`] values within the grid.
pub fn plan_get_rows(plan: &Plan, call: &GetRowsCall<'_>) -> Result<GetRowsPlan> {
    plan.check()?;
    let w = &call.weight;
    let s = Shape::of(w)?;
    let align = plan.align;
    let size = call.dtype.size() as u64;
    let n_ids = call.n_ids;
    let key = KernelKey::get_rows(s.format, call.dtype);
    let mut out = GetRowsPlan {
        shape: s,
        runs: Vec::new(),
        key,
        windows: Vec::new(),
    };
    if n_ids == 0 {
        return Ok(out);
    }
    span_of(call.ids, 0, n_ids, align, "ids")?;
    let out_align = align.max(windows::DST_ALIGN);
    if !call.out.offset.is_multiple_of(out_align) {
        return Err(invalid(format!(
            "get_rows output offset {} is not a multiple of {out_align}",
            call.out.offset
        )));
    }
    let row_out = s.k * size;
    let out_len = n_ids
        .checked_mul(row_out)
        .and_then(|b| b.checked_next_multiple_of(windows::DST_ALIGN));
    if out_len.is_none_or(|l| call.out.offset.saturating_add(l) > call.out.len) {
        return Err(invalid(format!(
            "get_rows output needs {} bytes from {}, the buffer has {}",
            out_len.unwrap_or(u64::MAX),
            call.out.offset,
            call.out.len
        )));
    }
    let runs = row_runs(plan, w, &s, u64::MAX)?;
    if !s.k.is_multiple_of(8) && runs.len() > 1 {
        return Err(invalid(format!(
            "{}: rows of {} values (not a multiple of 8) are gathered from one binding only",
            w.name, s.k
        )));
    }
    // Ids per window: output windows start on aligned offsets and fit a binding, and their
    // groups of GET_ROWS_VALUES values fit the grid.
    let per_group = (WORKGROUP_SIZE * GET_ROWS_VALUES) as u64;
    let l = out_align.max(32);
    let step = l / windows::gcd(l, row_out);
    let room = plan.max_binding.saturating_sub(64);
    let by_groups = plan
        .max_dim
        .saturating_mul(plan.max_dim)
        .saturating_mul(per_group)
        / s.k;
    let per = (room / row_out).min(by_groups).min(u32::MAX as u64 / s.k) / step * step;
    if per == 0 {
        return Err(GpuError::TooLarge {
            what: format!("{step} gathered rows of {} in a storage binding", w.name),
            bytes: step.saturating_mul(row_out),
            limit: plan.max_binding,
        }
        .into());
    }
    let mut i0 = 0;
    while i0 < n_ids {
        let n = per.min(n_ids - i0);
        let n_out = n * s.k;
        let ids = span_of(call.ids, i0, n, align, "ids")?;
        let dispatches = runs
            .iter()
            .enumerate()
            .map(|(i, run)| GetRowsDispatch {
                run: i,
                params: GetRowsParams {
                    k: s.k as u32,
                    n_out: n_out as u32,
                    row_bytes: s.row_bytes as u32,
                    w_skip: run.skip as u32,
                    row_first: run.first as u32,
                    row_count: run.count as u32,
                    n_rows: s.rows.min(u32::MAX as u64) as u32,
                    ids_skip: ids.skip,
                },
            })
            .collect();
        out.windows.push(GetRowsWindow {
            ids,
            out: (
                call.out.offset + i0 * row_out,
                (n_out * size).next_multiple_of(windows::DST_ALIGN),
            ),
            grid: windows::grid(n_out.div_ceil(per_group), plan.max_dim),
            dispatches,
        });
        i0 += n;
    }
    out.runs = runs;
    Ok(out)
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
            key: KernelKey::matvec_id(s.format, plan.threads, false),
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
    let rows_per_group = (WORKGROUP_SIZE / plan.threads) as u64;
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
    let key = KernelKey::matvec_id(s.format, plan.threads, vec_x)
        .with_vec_w(aligned_rows(&s, &runs))
        .with_subgroups(plan.subgroups)
        .with_x_lanes(plan.x_lanes)
        .with_unroll(plan.unroll);
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

/// The wgpu side of planning: resident tensors and operand buffers as the planner sees them.
#[cfg(feature = "gpu")]
mod resident {
    use super::{Extent, Shape};
    use crate::gpu::kernels::Operand;
    use crate::gpu::loader::ResidentTensor;
    use crate::Result;

    /// `t`'s shape ([`Shape::of`]).
    pub(crate) fn shape(t: &ResidentTensor) -> Result<Shape> {
        Shape::of(&t.layout())
    }

    /// `op` as the planner sees it, checked to be a storage buffer; errors name `what`.
    pub(crate) fn extent(op: &Operand<'_>, what: &str) -> Result<Extent> {
        if !op.buffer.usage().contains(wgpu::BufferUsages::STORAGE) {
            return Err(super::invalid(format!(
                "{what}: the buffer needs usage STORAGE"
            )));
        }
        Ok(Extent {
            offset: op.offset,
            len: op.buffer.size(),
        })
    }
}
#[cfg(feature = "gpu")]
pub(crate) use resident::{extent, shape};

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn plan(max_binding: u64) -> Plan {
        Plan {
            align: 256,
            uniform_align: 256,
            max_binding,
            max_dim: 65535,
            threads: 1,
            subgroups: false,
            x_lanes: 1,
            precision: Precision::Exact,
            unroll: false,
            rows: None,
            rows_subgroups: false,
        }
    }

    #[test]
    fn spans_start_on_aligned_offsets() {
        assert_eq!(
            span_in(0, 4096, 70, 10, 256),
            Some(Span {
                offset: 256,
                size: 64,
                skip: 6
            })
        );
        assert_eq!(
            span_in(16, 64, 0, 12, 256),
            Some(Span {
                offset: 0,
                size: 64,
                skip: 4
            })
        );
        assert_eq!(span_in(16, 64, 0, 13, 256), None);
        assert_eq!(span_in(0, u64::MAX, u64::MAX / 2, 2, 256), None);
    }

    #[test]
    fn runs_hold_whole_rows_of_one_binding() {
        // 1000-byte rows in 16 KiB bindings at a 256-byte alignment: 16 rows per run.
        assert_eq!(rows_per_run(&plan(16 << 10), 1000, u64::MAX), Some(16));
        assert_eq!(rows_per_run(&plan(16 << 10), 1000, 5), Some(5));
        assert_eq!(rows_per_run(&plan(1200), 1000, 5), None);
    }
}

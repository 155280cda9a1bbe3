//! The get_rows family: rows of a weight by id (the embedding lookup), bit-exact, as f32, f16
//! or bf16 (`shaders/kernels/get_rows.wgsl`: [`GET_ROWS_VALUES`] values per invocation). Its
//! key, its WGSL and its dispatch plan.

use super::super::compose;
use super::super::params::GetRowsParams;
use super::super::plan::{
    invalid, row_runs, span_of, Extent, Plan, RowRun, Shape, Span, WeightLayout,
};
use super::super::{Buf, KernelKey, Op, StorageBinding, Variant, GET_ROWS_VALUES, WORKGROUP_SIZE};
use crate::gpu::{windows, GpuError};
use crate::{DType, Format, Result};

/// get_rows' group-0 bindings (`shaders/kernels/get_rows.wgsl`): the weight, the packed output
/// rows, the ids, the grids (formats that read them).
pub const BINDINGS: &[StorageBinding] = &[
    StorageBinding::read(Buf::W, 0, 4),
    StorageBinding::out(2, 16),
    StorageBinding::read(Buf::Ids, 3, 4),
    StorageBinding::read(Buf::Grids, 4, 4),
];

/// A get_rows kernel's variant: the output dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GetRows {
    /// The output element type.
    pub dtype: DType,
}

/// `.f16`: the output dtype.
impl std::fmt::Display for GetRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, ".{}", self.dtype.name())
    }
}

impl KernelKey {
    /// get_rows of `format` into `dtype`.
    pub const fn get_rows(format: Format, dtype: DType) -> KernelKey {
        KernelKey {
            format,
            variant: Variant::GetRows(GetRows { dtype }),
        }
    }
}

/// The get_rows variants of `format`: one per output dtype.
pub(in crate::gpu::kernels) fn keys(format: Format) -> Vec<KernelKey> {
    DType::ALL.map(|d| KernelKey::get_rows(format, d)).to_vec()
}

/// The WGSL of a get_rows kernel of `format`: the format's decoder with the dtype's output
/// packer.
pub(in crate::gpu::kernels) fn source(format: Format, v: &GetRows) -> Result<String> {
    let packer = match v.dtype {
        DType::F32 => lib_file!("out_f32"),
        DType::F16 => concat!(lib_file!("out_f16"), lib_file!("store_pairs")),
        DType::BF16 => concat!(lib_file!("out_bf16"), lib_file!("store_pairs")),
    };
    compose::plain_source(format, Op::GetRows, packer)
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

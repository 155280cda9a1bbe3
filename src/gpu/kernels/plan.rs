//! Planning, without recording anything: a weight's shape as the kernels see it, its runs of
//! whole rows that each fit one storage binding, and checked spans of the operand buffers.

use super::layout::Plan;
use super::Operand;
use crate::gpu::loader::ResidentTensor;
use crate::gpu::GpuError;
use crate::{DType, Error, Format, Result};

pub(crate) fn invalid(m: String) -> Error {
    GpuError::InvalidJob(m).into()
}

/// A weight's shape as the kernels see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The format the kernels decode: the tensor's own, or its resident dtype's.
    pub(crate) format: Format,
    /// Values per row.
    pub(crate) k: u64,
    /// Rows.
    pub(crate) rows: u64,
    /// Bytes per row.
    pub(crate) row_bytes: u64,
}

/// `t` as rows of `dims[0]` values of a format with a shader, each row at most `u32` bytes.
pub(crate) fn shape(t: &ResidentTensor) -> Result<Shape> {
    let format = match t.dtype {
        None => t.format,
        Some(DType::F32) => Format::F32,
        Some(DType::F16) => Format::F16,
        Some(DType::BF16) => Format::BF16,
    };
    let k = t.dims.first().copied().unwrap_or(0);
    if !format.has_shader() {
        return Err(invalid(format!(
            "{}: {format} has no shader (multiply it on the CPU with ops)",
            t.name
        )));
    }
    if k == 0 || t.n_elements == 0 || !t.n_elements.is_multiple_of(k) {
        return Err(invalid(format!(
            "{}: dims {:?} are not rows of K values",
            t.name, t.dims
        )));
    }
    let elems = format.block_elems() as u64;
    if !k.is_multiple_of(elems) {
        return Err(invalid(format!(
            "{}: K = {k} is not a multiple of the {elems}-value {format} block",
            t.name
        )));
    }
    let row_bytes = k / elems * format.block_bytes() as u64;
    if k > u32::MAX as u64 / 8 || row_bytes > u32::MAX as u64 {
        return Err(invalid(format!(
            "{}: rows of {k} values are too long",
            t.name
        )));
    }
    Ok(Shape {
        format,
        k,
        rows: t.n_elements / k,
        row_bytes,
    })
}

/// One dispatch's run of whole weight rows inside one binding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowRun<'a> {
    pub(crate) buffer: &'a wgpu::Buffer,
    pub(crate) offset: u64,
    pub(crate) size: u64,
    /// Bytes from the binding's start to row `first`.
    pub(crate) skip: u64,
    pub(crate) first: u64,
    pub(crate) count: u64,
}

/// Rows per run: as many whole rows of `row_bytes` as one binding of `max_binding` bytes holds
/// from any aligned offset, at most `max_rows`; `None` when not even one row fits.
pub(crate) fn rows_per_run(plan: &Plan, row_bytes: u64, max_rows: u64) -> Option<u64> {
    let fit = plan.max_binding.saturating_sub(plan.align + 4) / row_bytes;
    (fit > 0).then(|| fit.min(max_rows).max(1))
}

/// The runs of whole rows of `t`, each inside one binding and at most `max_rows` rows.
pub(crate) fn row_runs<'t>(
    plan: &Plan,
    t: &'t ResidentTensor,
    s: &Shape,
    max_rows: u64,
) -> Result<Vec<RowRun<'t>>> {
    let per = rows_per_run(plan, s.row_bytes, max_rows).ok_or_else(|| GpuError::TooLarge {
        what: format!(
            "one row of {} ({} bytes) in a storage binding",
            t.name, s.row_bytes
        ),
        bytes: s.row_bytes + plan.align,
        limit: plan.max_binding,
    })?;
    let mut runs = Vec::new();
    for p in &t.parts {
        let (first, end) = (p.elements.start / s.k, p.elements.end.div_ceil(s.k));
        if !p.elements.start.is_multiple_of(s.k)
            || (!p.elements.end.is_multiple_of(s.k) && p.elements.end != t.n_elements)
        {
            return Err(invalid(format!(
                "{}: a buffer boundary at element {} splits a row of {} values",
                t.name, p.elements.start, s.k
            )));
        }
        let mut r = first;
        while r < end {
            let n = per.min(end - r);
            let b = t.bind_elements(r * s.k..(r + n) * s.k, plan.align)?;
            runs.push(RowRun {
                buffer: b.buffer,
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

/// A checked run of `count` 4-byte elements of an operand from element `first`, bound from an
/// offset that is a multiple of `align`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) offset: u64,
    pub(crate) size: u64,
    /// Elements from the binding's start to element `first`.
    pub(crate) skip: u32,
}

/// The [`Span`] of elements `first .. first + count` of `op`; errors name `what`.
pub(crate) fn span(
    op: &Operand<'_>,
    first: u64,
    count: u64,
    align: u64,
    what: &str,
) -> Result<Span> {
    if !op.offset.is_multiple_of(4) {
        return Err(invalid(format!(
            "{what}: offset {} is not a multiple of 4",
            op.offset
        )));
    }
    if !op.buffer.usage().contains(wgpu::BufferUsages::STORAGE) {
        return Err(invalid(format!("{what}: the buffer needs usage STORAGE")));
    }
    span_in(op.offset, op.buffer.size(), first, count, align).ok_or_else(|| {
        invalid(format!(
            "{what}: {count} values from byte {} pass the buffer's {} bytes",
            op.offset.saturating_add(first.saturating_mul(4)),
            op.buffer.size()
        ))
    })
}

/// The arithmetic of [`span`]: elements `first .. first + count` from byte `offset` of a buffer
/// of `len` bytes, or `None` when they pass its end.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(max_binding: u64) -> Plan {
        Plan {
            align: 256,
            uniform_align: 256,
            max_binding,
            max_dim: 65535,
            threads: 1,
            subgroups: false,
            x_lanes: 1,
            precision: crate::gpu::kernels::Precision::Exact,
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

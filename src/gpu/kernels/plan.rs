//! Planning, without wgpu, what every family shares: the limits and choices a recording plans
//! with ([`Plan`]), a weight's shape and its runs of whole rows that each fit one storage
//! binding, and checked spans of the operands. Each family plans its dispatches in its own file
//! ([`super::family`]: `plan_mul`, `plan_get_rows`, `plan_matvec_id`) with the kernel, bindings,
//! parameters and grid of each; the recorder only executes these plans, so they are tested
//! without a GPU and fuzzed (`fuzz/fuzz_targets/kernel_plan.rs`).

use std::ops::Range;

use super::{MatVecPolicy, Precision};
use crate::gpu::GpuError;
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
    /// The matvec and matvec_id kernels' choices ([`MatVecPolicy`]).
    pub matvec: MatVecPolicy,
    /// The precision products were asked to sum in; each gets it where a kernel honours it
    /// ([`Precision::honoured`]).
    pub precision: Precision,
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
/// 16-byte chunks: the weight can be read four words per load ([`MatVec::vec_w`](super::MatVec::vec_w)).
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
    use super::super::Mapping;
    use super::*;

    pub(crate) fn plan(max_binding: u64) -> Plan {
        Plan {
            align: 256,
            uniform_align: 256,
            max_binding,
            max_dim: 65535,
            matvec: MatVecPolicy {
                mapping: Mapping::Classic,
                threads: 1,
                subgroups: None,
                unroll: false,
                hw_f16: false,
                hw_f16_scales: false,
            },
            precision: Precision::Exact,
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

//! Splitting a tensor into windows that fit one storage binding.
//!
//! A window is a run of whole blocks bound at `(offset, size)` into both the source and the output
//! buffer. Window offsets are multiples of a *step* of blocks chosen so that the source offset is a
//! multiple of both the block size and `min_storage_buffer_offset_alignment`, and the output
//! offset a multiple of that alignment and of 16 (the output is bound as `array<vec4<u32>>`).
//! Window sizes are rounded up to 4 (source) and 16 (output) bytes for the binding, so a buffer
//! must have that padding after its last value; [`padded`] gives the sizes.
//!
//! [`plan_windows`] is that windowing as the engine runs it, public so that it can be fuzzed
//! (`fuzz/fuzz_targets/plan.rs`) and so that callers who bind resident buffers themselves can
//! cut them the same way. It takes any limit and any alignment (devices report powers of two)
//! and never panics: impossible values are [`GpuError::LimitTooSmall`] or
//! [`GpuError::InvalidLimits`].

use super::GpuError;
use crate::{DType, Format};

/// Bytes of the output binding's element (`vec4<u32>`).
pub(crate) const DST_ALIGN: u64 = 16;
/// Bytes of the source binding's element (`u32`).
pub(crate) const SRC_ALIGN: u64 = 4;

/// `x` rounded up to a multiple of `m` (a power of two).
pub(crate) const fn round_up(x: u64, m: u64) -> u64 {
    (x + m - 1) & !(m - 1)
}

/// The greatest common divisor (the alignment arithmetic of windows, load parts and kernels).
pub(crate) const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// The least common multiple of two non-zero numbers; `None` when it does not fit a u64.
const fn lcm(a: u64, b: u64) -> Option<u64> {
    (a / gcd(a, b)).checked_mul(b)
}

/// The largest binding a window uses: the shaders index values and words with u32, so a window
/// holds at most 4 GiB - 1 bytes whatever the device allows.
pub const MAX_WINDOW_BYTES: u64 = u32::MAX as u64;

/// How a tensor of one format and output size is cut into windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowPlan {
    /// Window offsets are multiples of this many blocks.
    pub step_blocks: u64,
    /// Blocks per window (a multiple of `step_blocks`); the last window may be shorter.
    pub max_blocks: u64,
}

/// The engine's windowing of `format` decoded to `dtype` under a storage-binding limit of `limit`
/// bytes and an offset alignment of `align` bytes (`min_storage_buffer_offset_alignment`).
///
/// Every window of [`WindowPlan::windows`] starts at a multiple of `step_blocks` blocks, so its
/// source offset (`first * block_bytes`) is a multiple of `align`, and its output offset a
/// multiple of `align` and 16; its [`padded`] source and output sizes are at most `limit` and
/// at most [`MAX_WINDOW_BYTES`]. Errors: [`GpuError::InvalidLimits`] for an alignment of 0 or
/// one so large that the step of blocks overflows, [`GpuError::LimitTooSmall`] when `limit`
/// cannot hold one step.
pub fn plan_windows(
    format: Format,
    dtype: DType,
    limit: u64,
    align: u64,
) -> Result<WindowPlan, GpuError> {
    plan(format, dtype.size() as u64, limit, align)
}

/// [`plan_windows`] with `out_size`-byte output values (2 or 4; 2 gives offsets valid for
/// both).
pub(crate) fn plan(
    format: Format,
    out_size: u64,
    limit: u64,
    align: u64,
) -> Result<WindowPlan, GpuError> {
    let bytes = format.block_bytes() as u64;
    let out_block = format.block_elems() as u64 * out_size;
    if align == 0 || bytes == 0 || out_block == 0 {
        return Err(GpuError::InvalidLimits(format!(
            "{format}: offset alignment {align}, {bytes}-byte blocks, {out_block} output bytes per block"
        )));
    }
    let dst_align = lcm(align, DST_ALIGN);
    let step_blocks = dst_align.and_then(|d| lcm(align / gcd(align, bytes), d / gcd(d, out_block)));
    let Some(step_blocks) = step_blocks else {
        return Err(GpuError::InvalidLimits(format!(
            "{format}: an offset alignment of {align} bytes needs a window step of more than 2^64 blocks"
        )));
    };
    let cap = limit.min(MAX_WINDOW_BYTES);
    let fit = ((cap & !(SRC_ALIGN - 1)) / bytes).min((cap & !(DST_ALIGN - 1)) / out_block);
    let max_blocks = fit / step_blocks * step_blocks;
    if max_blocks == 0 {
        return Err(GpuError::LimitTooSmall {
            format,
            limit,
            step_blocks,
        });
    }
    Ok(WindowPlan {
        step_blocks,
        max_blocks,
    })
}

impl WindowPlan {
    /// `(first block, block count)` of each window over `n_blocks` blocks, in order; the last
    /// one is `next_back()` without walking the others.
    pub fn windows(self, n_blocks: u64) -> impl DoubleEndedIterator<Item = (u64, u64)> {
        let step = self.max_blocks;
        (0..n_blocks.div_ceil(step)).map(move |i| (i * step, step.min(n_blocks - i * step)))
    }

    /// The number of windows over `n_blocks` blocks.
    pub fn count(self, n_blocks: u64) -> u64 {
        n_blocks.div_ceil(self.max_blocks)
    }
}

/// `(source bytes, output bytes)` a buffer pair must hold for `n_blocks` blocks of `format` with
/// `out_size`-byte values: the data rounded up to 4 and 16 bytes.
pub const fn padded(format: Format, n_blocks: u64, out_size: u64) -> (u64, u64) {
    let src = n_blocks * format.block_bytes() as u64;
    let dst = n_blocks * format.block_elems() as u64 * out_size;
    (round_up(src, SRC_ALIGN), round_up(dst, DST_ALIGN))
}

/// [`padded`] in checked arithmetic: `None` when a size does not fit a u64.
#[cfg(feature = "gpu")]
pub(crate) fn checked_padded(format: Format, n_blocks: u64, out_size: u64) -> Option<(u64, u64)> {
    let src = n_blocks.checked_mul(format.block_bytes() as u64)?;
    let dst = n_blocks
        .checked_mul(format.block_elems() as u64)?
        .checked_mul(out_size)?;
    Some((
        src.checked_next_multiple_of(SRC_ALIGN)?,
        dst.checked_next_multiple_of(DST_ALIGN)?,
    ))
}

/// The workgroup grid for `groups` workgroups with at most `max_dim` per dimension: 1-D when it
/// fits, else folded to 2-D with as few surplus groups as possible (fewer than `y`).
pub(crate) fn grid(groups: u64, max_dim: u64) -> (u32, u32) {
    if groups <= max_dim {
        return (groups as u32, 1);
    }
    let y = groups.div_ceil(max_dim);
    let x = groups.div_ceil(y);
    (x as u32, y as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_keep_offsets_aligned() {
        for &f in Format::ALL {
            if !f.has_shader() {
                continue;
            }
            for out in [2u64, 4] {
                for align in [4u64, 16, 32, 64, 256] {
                    let p = plan(f, out, 1 << 20, align).unwrap();
                    let src = p.step_blocks * f.block_bytes() as u64;
                    let dst = p.step_blocks * f.block_elems() as u64 * out;
                    assert_eq!(src % align, 0, "{f}");
                    assert_eq!(dst % align.max(16), 0, "{f}");
                    assert!(p.max_blocks * f.block_bytes() as u64 <= 1 << 20);
                }
            }
        }
    }

    #[test]
    fn windows_cover_every_block_once() {
        let p = WindowPlan {
            step_blocks: 3,
            max_blocks: 9,
        };
        let w: Vec<_> = p.windows(20).collect();
        assert_eq!(w, vec![(0, 9), (9, 9), (18, 2)]);
        assert_eq!(p.windows(0).count(), 0);
    }

    #[test]
    fn grid_folds_past_the_limit() {
        assert_eq!(grid(10, 65_535), (10, 1));
        assert_eq!(grid(65_535, 65_535), (65_535, 1));
        let (x, y) = grid(65_536, 65_535);
        assert!(x as u64 * y as u64 >= 65_536 && (x as u64 * y as u64) - 65_536 < y as u64);
        let (x, y) = grid(10_000_000, 65_535);
        assert!(x <= 65_535 && (x as u64 * y as u64) - 10_000_000 < y as u64);
    }
}

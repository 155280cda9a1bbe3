//! Splitting a tensor into windows that fit one storage binding, and uploading raw blocks.
//!
//! A window is a run of whole blocks bound at `(offset, size)` into both the source and the output
//! buffer. Window offsets are multiples of a *step* of blocks chosen so that the source offset is a
//! multiple of both the block size and `min_storage_buffer_offset_alignment`, and the output
//! offset a multiple of that alignment and of 16 (the output is bound as `array<vec4<u32>>`).
//! Window sizes are rounded up to 4 (source) and 16 (output) bytes for the binding, so a buffer
//! must have that padding after its last value; [`padded`] gives the sizes.

use super::GpuError;
use crate::Format;

/// Bytes of the output binding's element (`vec4<u32>`).
pub(crate) const DST_ALIGN: u64 = 16;
/// Bytes of the source binding's element (`u32`).
pub(crate) const SRC_ALIGN: u64 = 4;

/// `x` rounded up to a multiple of `m` (a power of two).
pub(crate) const fn round_up(x: u64, m: u64) -> u64 {
    (x + m - 1) & !(m - 1)
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

const fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}

/// How a tensor of one format and output size is cut into windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowPlan {
    /// Window offsets are multiples of this many blocks.
    pub step_blocks: u64,
    /// Blocks per window (a multiple of `step_blocks`); the last window may be shorter.
    pub max_blocks: u64,
}

/// The window plan for `format` with `out_size`-byte output values under a binding limit of
/// `limit` bytes and an offset alignment of `align` bytes.
pub(crate) fn plan(
    format: Format,
    out_size: u64,
    limit: u64,
    align: u64,
) -> Result<WindowPlan, GpuError> {
    let bytes = format.block_bytes() as u64;
    let out_block = format.block_elems() as u64 * out_size;
    let dst_align = align.max(DST_ALIGN);
    let step_blocks = lcm(
        align / gcd(align, bytes),
        dst_align / gcd(dst_align, out_block),
    );
    let fit = ((limit & !(SRC_ALIGN - 1)) / bytes).min((limit & !(DST_ALIGN - 1)) / out_block);
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
    /// `(first block, block count)` of each window over `n_blocks` blocks.
    pub(crate) fn windows(self, n_blocks: u64) -> impl Iterator<Item = (u64, u64)> {
        let step = self.max_blocks;
        (0..n_blocks.div_ceil(step)).map(move |i| (i * step, step.min(n_blocks - i * step)))
    }
}

/// `(source bytes, output bytes)` a buffer pair must hold for `n_blocks` blocks of `format` with
/// `out_size`-byte values: the data rounded up to 4 and 16 bytes.
pub const fn padded(format: Format, n_blocks: u64, out_size: u64) -> (u64, u64) {
    let src = n_blocks * format.block_bytes() as u64;
    let dst = n_blocks * format.block_elems() as u64 * out_size;
    (round_up(src, SRC_ALIGN), round_up(dst, DST_ALIGN))
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

/// Creates a storage buffer holding `src` exactly as it is (the caller's memory map, not repacked),
/// padded with zeros to a multiple of 4 bytes.
pub(crate) fn upload(
    device: &wgpu::Device,
    label: &str,
    src: &[u8],
) -> Result<wgpu::Buffer, GpuError> {
    let size = round_up(src.len() as u64, SRC_ALIGN).max(SRC_ALIGN);
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: true,
    });
    {
        let mut view = buffer
            .get_mapped_range_mut(..)
            .map_err(|e| GpuError::Map(format!("{label}: {e}")))?;
        view.slice(..src.len()).copy_from_slice(src);
        view.slice(src.len()..).fill(0);
    }
    buffer.unmap();
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_keep_offsets_aligned() {
        for &f in Format::ALL {
            if super::super::shaders::source(f, crate::DType::F32).is_none() {
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

//! Fuzz target: the GPU engine's window planner (`gpu::plan_windows`) on arbitrary limits,
//! alignments, block counts, formats and dtypes.
//!
//! Input: byte 0 picks the format (`Format::ALL[b % len]`), byte 1 the dtype and how the
//! alignment is read, then three little-endian u64s: the binding limit, the alignment and the
//! block count (missing bytes are zeros). Half the inputs take the alignment as a power of two
//! (what devices report), the others as any u64, 0 and odd values included.
//!
//! The planner must not panic, overflow or loop. When it accepts, the windows tile `0..n_blocks`
//! exactly, in order; every window but the last holds `max_blocks` blocks; every offset is a
//! multiple of the step, so the source offset is a multiple of the alignment (and of the block
//! size, being whole blocks) and the output offset a multiple of the alignment and 16; the
//! padded binding sizes fit the limit and 4 GiB; the per-window shader parameters fit u32.
#![no_main]

use gguf_dequant::gpu::{plan_windows, windows, GpuError};
use gguf_dequant::{DType, Format};
use libfuzzer_sys::fuzz_target;

fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    for (i, x) in b.iter_mut().enumerate() {
        *x = data.get(at + i).copied().unwrap_or(0);
    }
    u64::from_le_bytes(b)
}

/// Checks one window against the plan: `(first, count)` as `windows` gave it.
fn check_window(
    format: Format,
    dtype: DType,
    limit: u64,
    align: u64,
    step: u64,
    (first, count): (u64, u64),
) {
    let bytes = format.block_bytes() as u128;
    let out_block = (format.block_elems() * dtype.size()) as u128;
    assert!(count > 0, "empty window at {first}");
    assert_eq!(
        first % step,
        0,
        "window at {first} is not a multiple of step {step}"
    );
    let src_off = first as u128 * bytes;
    let dst_off = first as u128 * out_block;
    assert_eq!(
        src_off % align as u128,
        0,
        "source offset {src_off} vs align {align}"
    );
    assert_eq!(
        dst_off % align as u128,
        0,
        "output offset {dst_off} vs align {align}"
    );
    assert_eq!(dst_off % 16, 0, "output offset {dst_off} vs 16");
    let (s_len, d_len) = windows::padded(format, count, dtype.size() as u64);
    let cap = limit.min(windows::MAX_WINDOW_BYTES);
    assert!(s_len <= cap && d_len <= cap, "{s_len}/{d_len} > {cap}");
    assert_eq!(s_len as u128, (count as u128 * bytes).div_ceil(4) * 4);
    assert_eq!(d_len as u128, (count as u128 * out_block).div_ceil(16) * 16);
    let n_out = count as u128 * format.block_elems() as u128;
    assert!(n_out <= u32::MAX as u128, "{n_out} values in one window");
}

fuzz_target!(|data: &[u8]| {
    let (Some(&f), Some(&mode)) = (data.first(), data.get(1)) else {
        return;
    };
    let format = Format::ALL[f as usize % Format::ALL.len()];
    let dtype = DType::ALL[(mode & 3) as usize % DType::ALL.len()];
    let limit = u64_at(data, 2);
    let raw_align = u64_at(data, 10);
    let align = if mode & 4 == 0 {
        1u64.checked_shl((raw_align % 64) as u32).unwrap_or(1)
    } else {
        raw_align
    };
    let n_blocks = u64_at(data, 18);

    let plan = match plan_windows(format, dtype, limit, align) {
        Ok(p) => p,
        Err(GpuError::LimitTooSmall {
            limit: l,
            step_blocks,
            ..
        }) => {
            assert_eq!(l, limit);
            assert!(step_blocks > 0);
            return;
        }
        Err(GpuError::InvalidLimits(m)) => {
            assert!(!m.is_empty());
            return;
        }
        Err(e) => panic!("unexpected error {e:?}"),
    };
    let step = plan.step_blocks;
    assert!(step > 0 && plan.max_blocks >= step && plan.max_blocks % step == 0);
    // The planner is deterministic and the same for the engine's crate-level entry point.
    assert_eq!(plan_windows(format, dtype, limit, align).ok(), Some(plan));

    let count = plan.count(n_blocks);
    assert_eq!(count, n_blocks.div_ceil(plan.max_blocks));
    // Walk every window when there are few; else the first ones, and the last from the back.
    let mut next = 0u64;
    let mut seen = 0u64;
    for w in plan.windows(n_blocks).take(4096) {
        assert_eq!(w.0, next, "windows out of order or with a gap");
        assert!(seen + 1 == count || w.1 == plan.max_blocks);
        check_window(format, dtype, limit, align, step, w);
        next = w.0 + w.1;
        seen += 1;
    }
    if count <= 4096 {
        assert_eq!(seen, count);
        assert_eq!(next, n_blocks, "windows do not end at n_blocks");
    } else {
        let last = plan.windows(n_blocks).next_back().expect("a last window");
        assert_eq!(last.0, (count - 1) * plan.max_blocks);
        assert_eq!(last.0 + last.1, n_blocks);
        check_window(format, dtype, limit, align, step, last);
    }
    if n_blocks == 0 {
        assert_eq!(plan.windows(0).next(), None);
    }
});

//! Fuzz target: the kernels' dispatch planners (`gpu::kernels::plan_mul`, `plan_get_rows`,
//! `plan_matvec_id`) on arbitrary limits, weights (formats, dtypes, experts, parts), columns,
//! ids, operand offsets and lengths, products and tuner choices, as `tests/support/kernel_plan.rs`
//! draws them from the input: byte 0 picks the planner, then two bytes per number (zeros past
//! the end).
//!
//! The planners must not panic or overflow. When they accept, the plan keeps every invariant of
//! `kernel_plan`'s checks: runs tile the rows in whole rows inside their part's buffer and one
//! binding; column groups, id windows and pair windows tile the columns, ids and pairs; every
//! operand binding starts aligned, lies in its buffer and one binding and covers exactly its
//! values; the parameters and grids fit u32 and the device's grid; the policy's mapping and
//! precision (the mode honoured or exact, never a looser one; int8 on the classic mapping after
//! its quantiser, whose codes fit a binding).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../tests/support/kernel_plan.rs"]
mod kernel_plan;

fuzz_target!(|data: &[u8]| {
    let Some((&which, data)) = data.split_first() else {
        return;
    };
    let mut at = 0;
    let mut next = || {
        let b = |i: usize| data.get(i).copied().unwrap_or(0) as u64;
        let v = b(at) | b(at + 1) << 8;
        at += 2;
        v
    };
    match which % 3 {
        0 => drop(kernel_plan::case(&mut next).run()),
        1 => drop(kernel_plan::get_rows_case(&mut next).run()),
        _ => drop(kernel_plan::matvec_id_case(&mut next).run()),
    }
});

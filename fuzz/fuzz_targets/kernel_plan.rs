//! Fuzz target: the products' dispatch planner (`gpu::kernels::plan_mul`) on arbitrary limits,
//! weights (formats, dtypes, parts), columns, operand offsets and lengths, products and tuner
//! choices, as `tests/support/mul_plan.rs` draws them from the input (two bytes per number,
//! zeros past the end).
//!
//! The planner must not panic or overflow. When it accepts, the plan keeps every invariant of
//! `mul_plan::check`: runs tile the rows in whole rows inside their part's buffer and one
//! binding; column groups tile the columns within the product's width; every X and Y binding
//! starts aligned, lies in its buffer and one binding and covers exactly its values; the
//! parameters and grids fit u32 and the device's grid; the policy's mapping and precision
//! (the mode honoured or exact, never a looser one; int8 on the classic mapping after its
//! quantiser, whose codes fit a binding).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../tests/support/mul_plan.rs"]
mod mul_plan;

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    let mut next = || {
        let b = |i: usize| data.get(i).copied().unwrap_or(0) as u64;
        let v = b(at) | b(at + 1) << 8;
        at += 2;
        v
    };
    mul_plan::case(&mut next).run();
});

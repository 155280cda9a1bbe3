//! The ternary family: values in {-1, 0, +1} × d (spec §4.23, §4.24).

pub mod tq1_0;
pub mod tq2_0;

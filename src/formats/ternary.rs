//! The ternary family.

pub mod tq1_0;
pub mod tq2_0;

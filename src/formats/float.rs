//! The float family: one-element IEEE-style types (spec §2.1, §2.2, §2.6, §4.1).

pub mod bf16;
pub mod f16;
pub mod f32;
pub mod f64;
pub mod f8_e4m3;

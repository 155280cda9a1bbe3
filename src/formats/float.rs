//! The float family.

pub mod f32;
pub mod f16;
pub mod bf16;
pub mod f64;
pub mod f8_e4m3;

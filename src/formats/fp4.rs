//! The fp4 family.

pub mod mxfp4;
pub mod nvfp4;

//! The FP4 family: E2M1 codes with a power-of-two (MXFP4) or UE4M3 (NVFP4) scale (spec §4.25, §4.26).

pub mod mxfp4;
pub mod nvfp4;

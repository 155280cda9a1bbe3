//! The k-quant family: 256-element super-blocks with packed sub-block scales (spec §4.8–§4.13).

pub mod q2_k;
pub mod q3_k;
pub mod q4_k;
pub mod q5_k;
pub mod q6_k;
pub mod q8_k;

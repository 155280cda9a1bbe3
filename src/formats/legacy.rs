//! The legacy family.

pub mod q4_0;
pub mod q4_1;
pub mod q5_0;
pub mod q5_1;
pub mod q8_0;
pub mod q8_1;
pub mod q1_0;
pub mod q2_0;

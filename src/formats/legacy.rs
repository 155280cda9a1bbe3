//! The legacy family: 32-element blocks with one f16 scale (Q4_0 … Q8_1), and the 1- and 2-bit
//! Q1_0 / Q2_0 (spec §4.2–§4.7, §4.27, §4.28).

pub mod q1_0;
pub mod q2_0;
pub mod q4_0;
pub mod q4_1;
pub mod q5_0;
pub mod q5_1;
pub mod q8_0;
pub mod q8_1;

//! The integer family: one-element two's-complement types, converted to f32 (spec §4.1).

pub mod i16;
pub mod i32;
pub mod i64;
pub mod i8;

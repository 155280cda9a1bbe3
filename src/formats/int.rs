//! The int family.

pub mod i8;
pub mod i16;
pub mod i32;
pub mod i64;

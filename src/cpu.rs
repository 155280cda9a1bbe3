//! cpu

//! Helpers shared by the benchmarks and `examples/cpu_throughput.rs`.

pub mod gen;

//! `bench`'s report: the JSON schema ([`Report`], written by [`report`] and read back by
//! [`read_report`] for `--compare`; `schema.rs`), the table of one run ([`write_table`];
//! `table.rs`) and the table that merges several reports ([`write_compare`]; `compare.rs`).

mod compare;
mod schema;
mod table;

pub use compare::{adapter_label, gpu_pairs, kernel_keys, several_hosts, write_compare};
pub use schema::{read_report, report, Adapter, KernelRow, Meta, Report, Row};
pub use table::write_table;

/// A finite figure with `prec` decimals, else `-`.
fn fmt(x: Option<f64>, prec: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.prec$}"),
        _ => "-".to_string(),
    }
}

/// Bytes in MiB.
fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// `lo–hi` of the finite values, with `prec` decimals.
fn range(v: impl Iterator<Item = Option<f64>>, prec: usize) -> String {
    let v: Vec<f64> = v.flatten().filter(|x| x.is_finite()).collect();
    let lo = v.iter().copied().reduce(f64::min);
    let hi = v.iter().copied().reduce(f64::max);
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{lo:.prec$}–{hi:.prec$}"),
        _ => "-".to_string(),
    }
}

/// Formats an optional figure in a cell of `width`.
fn cell(x: Option<f64>, prec: usize, width: usize) -> String {
    format!("{:>width$}", fmt(x, prec))
}

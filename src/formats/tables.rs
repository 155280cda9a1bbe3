//! Lookup tables of the i-quant and FP4 formats (spec §7), generated from `tables.json`.

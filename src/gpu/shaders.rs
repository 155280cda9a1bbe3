//! Compile-time assembly of the WGSL shaders (design §2): every shader is a `&'static str` built
//! with `concat!(include_str!(..))` from the shared helpers in `shaders/lib/` (`bytes`, `float`,
//! then any family helpers the format names with `lib [..]`, e.g. `kquant`), the lookup tables a
//! format names in `shaders/tables/`, the format's own `shaders/formats/<stem>.wgsl`, one output
//! packer (`out_f32`, or `out_f16` / `out_bf16` with the shared `store_pairs`) and the shared entry
//! point. No helper is copied into a format file.
//!
//! The list below names the formats that have a shader, with their file stem, tables and optional
//! extra helper files. It is the GPU half of the registry line (`FormatSpec::wgsl` reads it); a
//! format missing here is decoded on the CPU.
//!
//! # Thread mapping
//!
//! `entry.wgsl`: 64 invocations per workgroup, 8 contiguous values per invocation, so one
//! workgroup decodes 512 values = `512 / BLOCK_ELEMS` whole blocks, staged first into workgroup
//! memory with coalesced `u32` loads (which is how 17/18/22/34-byte blocks are read without any
//! CPU repacking). Invocations per block: 4 for the 32-value formats, 8 for NVFP4 and Q2_0, 16 for
//! Q1_0, 32 for the 256-value super-block formats (k-quants, TQ1_0, TQ2_0 and i-quants: 2 blocks
//! per workgroup, `part` = 8-value group 0..32, each inside one 16- or 32-value sub-block, so its
//! scale is unpacked once per invocation; an i-quant part is one 8-value grid group,
//! `4 * sub-block + group`); the one-value formats take 8 consecutive values each. Each invocation
//! stores two
//! `vec4<u32>` of f32 bits, or one `vec4<u32>` of f16/bf16 pairs.
//!
//! # Adding the 256-value super-block formats
//!
//! The same entry point fits `BLOCK_ELEMS = 256`: the k-quant and ternary files only define
//! `dequant8`; Q4_K and Q5_K also compose `shaders/lib/kquant.wgsl` (`get_scale_min_k4`) through
//! their `lib ["kquant"]` entry below, which any family helper file can use. A format that wants another
//! mapping ships its own entry file instead of `lib/entry.wgsl`, keeping the bindings and the
//! `Params` struct. Grids go into `shaders/tables/<name>.wgsl` (u64 entries as lo/hi u32 pairs),
//! generated from `formats::tables` and checked like `KVALUES_*` in `tests/shaders_layout_sync.rs`;
//! the i-quant grids (up to 16 KiB) are not WGSL data at all but the engine's read-only storage
//! buffer at binding 3 ([`super::tables`], `shaders/tables/iq_grids.wgsl` holds the offsets;
//! `benches/gpu_tables.rs` times it against workgroup memory and a `const` array). Exactness: the
//! k-quant products `(d * sc) * q` and `dmin * m` are exact in f32 (at most 11 + 6 + 6 significant
//! bits; Q6_K 11 + 7 + 5), so FMA contraction of the final subtraction cannot change the result;
//! Q8_K's f32 `d * q` can round and be subnormal, so its shader builds the rounded product with
//! integer operations; every i-quant step is exact too (each format file argues its case).

use crate::{DType, Format};

/// One composed shader: helpers, tables, the format file, an output packer, the entry point.
macro_rules! compose {
    ($stem:literal, [$($lib:literal),*], [$($table:literal),*], [$($out:literal),+]) => {
        concat!(
            "// ---- shaders/lib/bytes.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/bytes.wgsl")),
            "// ---- shaders/lib/float.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/float.wgsl")),
            $(
                "// ---- shaders/lib/", $lib, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/", $lib, ".wgsl")),
            )*
            $(
                "// ---- shaders/tables/", $table, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/tables/", $table, ".wgsl")),
            )*
            "// ---- shaders/formats/", $stem, ".wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/formats/", $stem, ".wgsl")),
            $(
                "// ---- shaders/lib/", $out, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/", $out, ".wgsl")),
            )+
            "// ---- shaders/lib/entry.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/entry.wgsl")),
        )
    };
}

macro_rules! gpu_formats {
    ($(($name:ident, $stem:literal, [$($table:literal),*] $(, lib [$($lib:literal),*])?)),* $(,)?) => {
        /// The composed WGSL that decodes `format` to `dtype`, or `None` when `format` has no
        /// shader (it is then decoded on the CPU).
        pub const fn source(format: Format, dtype: DType) -> Option<&'static str> {
            match (format, dtype) {
                $(
                    (Format::$name, DType::F32) => Some(compose!($stem, [$($($lib),*)?], [$($table),*], ["out_f32"])),
                    (Format::$name, DType::F16) => Some(compose!($stem, [$($($lib),*)?], [$($table),*], ["out_f16", "store_pairs"])),
                    (Format::$name, DType::BF16) => Some(compose!($stem, [$($($lib),*)?], [$($table),*], ["out_bf16", "store_pairs"])),
                )*
                _ => None,
            }
        }

        /// The file stem of `format`'s shader (`shaders/formats/<stem>.wgsl`), if it has one.
        pub const fn stem(format: Format) -> Option<&'static str> {
            match format {
                $(Format::$name => Some($stem),)*
                _ => None,
            }
        }

        /// The extra helper files `format`'s shader includes from `shaders/lib/` (besides
        /// `bytes`, `float`, the output packer and `entry`, which every shader includes).
        pub const fn libs(format: Format) -> &'static [&'static str] {
            match format {
                $(Format::$name => &[$($($lib),*)?],)*
                _ => &[],
            }
        }

        /// The lookup tables `format`'s shader includes from `shaders/tables/`.
        pub const fn tables(format: Format) -> &'static [&'static str] {
            match format {
                $(Format::$name => &[$($table),*],)*
                _ => &[],
            }
        }
    };
}

gpu_formats! {
    (F32, "f32", []),
    (F16, "f16", []),
    (Q4_0, "q4_0", []),
    (Q4_1, "q4_1", []),
    (Q5_0, "q5_0", []),
    (Q5_1, "q5_1", []),
    (Q8_0, "q8_0", []),
    (Q8_1, "q8_1", []),
    (Q2_K, "q2_k", []),
    (Q3_K, "q3_k", []),
    (Q4_K, "q4_k", [], lib ["kquant"]),
    (Q5_K, "q5_k", [], lib ["kquant"]),
    (Q6_K, "q6_k", []),
    (Q8_K, "q8_k", []),
    (IQ4_NL, "iq4_nl", ["kvalues_iq4nl"]),
    (BF16, "bf16", []),
    (MXFP4, "mxfp4", ["kvalues_fp4"]),
    (NVFP4, "nvfp4", ["kvalues_fp4"]),
    (Q1_0, "q1_0", []),
    (Q2_0, "q2_0", []),
    (F8_E4M3, "f8_e4m3", []),
    (TQ1_0, "tq1_0", []),
    (TQ2_0, "tq2_0", []),
    (IQ2_XXS, "iq2_xxs", ["iq_grids"], lib ["iquant"]),
    (IQ2_XS, "iq2_xs", ["iq_grids"], lib ["iquant"]),
    (IQ2_S, "iq2_s", ["iq_grids"], lib ["iquant"]),
    (IQ3_XXS, "iq3_xxs", ["iq_grids"], lib ["iquant"]),
    (IQ3_S, "iq3_s", ["iq_grids"], lib ["iquant"]),
    (IQ1_S, "iq1_s", ["iq_grids"]),
    (IQ1_M, "iq1_m", ["iq_grids"]),
    (IQ4_XS, "iq4_xs", ["kvalues_iq4nl"]),
}

/// Values each invocation of the shared entry point decodes (`VALS` in `entry.wgsl`).
pub const VALS_PER_INVOCATION: u64 = 8;
/// Invocations per workgroup (`WG_SIZE` in `entry.wgsl`).
pub const WORKGROUP_SIZE: u64 = 64;
/// Values per workgroup.
pub const VALS_PER_WORKGROUP: u64 = VALS_PER_INVOCATION * WORKGROUP_SIZE;

//! Compile-time assembly of the WGSL shaders (design §2): every shader is a `&'static str` built
//! with `concat!(include_str!(..))` from the shared helpers in `shaders/lib/`, the lookup tables a
//! format names in `shaders/tables/`, the format's own `shaders/formats/<stem>.wgsl`, one output
//! packer (`out_f32` / `out_f16` / `out_bf16`) and the shared entry point. No helper is copied
//! into a format file.
//!
//! The list below names the formats that have a shader, with their file stem and tables. It is
//! the GPU half of the registry line (`FormatSpec::wgsl` reads it); a format missing here is
//! decoded on the CPU. The 256-value super-block formats will be added here with their own
//! entry points (see `shaders/lib/entry.wgsl` for the contract).

use crate::{DType, Format};

/// One composed shader: helpers, tables, the format file, an output packer, the entry point.
macro_rules! compose {
    ($stem:literal, [$($table:literal),*], $out:literal) => {
        concat!(
            "// ---- shaders/lib/bytes.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/bytes.wgsl")),
            "// ---- shaders/lib/float.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/float.wgsl")),
            $(
                "// ---- shaders/tables/", $table, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/tables/", $table, ".wgsl")),
            )*
            "// ---- shaders/formats/", $stem, ".wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/formats/", $stem, ".wgsl")),
            "// ---- shaders/lib/out_", $out, ".wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/out_", $out, ".wgsl")),
            "// ---- shaders/lib/entry.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/entry.wgsl")),
        )
    };
}

macro_rules! gpu_formats {
    ($(($name:ident, $stem:literal, [$($table:literal),*])),* $(,)?) => {
        /// The composed WGSL that decodes `format` to `dtype`, or `None` when `format` has no
        /// shader (it is then decoded on the CPU).
        pub const fn source(format: Format, dtype: DType) -> Option<&'static str> {
            match (format, dtype) {
                $(
                    (Format::$name, DType::F32) => Some(compose!($stem, [$($table),*], "f32")),
                    (Format::$name, DType::F16) => Some(compose!($stem, [$($table),*], "f16")),
                    (Format::$name, DType::BF16) => Some(compose!($stem, [$($table),*], "bf16")),
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
    (IQ4_NL, "iq4_nl", ["kvalues_iq4nl"]),
    (BF16, "bf16", []),
    (MXFP4, "mxfp4", ["kvalues_fp4"]),
    (NVFP4, "nvfp4", ["kvalues_fp4"]),
    (Q1_0, "q1_0", []),
    (Q2_0, "q2_0", []),
    (F8_E4M3, "f8_e4m3", []),
}

/// Values each invocation of the shared entry point decodes (`VALS` in `entry.wgsl`).
pub const VALS_PER_INVOCATION: u64 = 8;
/// Invocations per workgroup (`WG_SIZE` in `entry.wgsl`).
pub const WORKGROUP_SIZE: u64 = 64;
/// Values per workgroup.
pub const VALS_PER_WORKGROUP: u64 = VALS_PER_INVOCATION * WORKGROUP_SIZE;

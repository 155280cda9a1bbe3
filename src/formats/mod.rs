//! The format registry: every live ggml tensor type, its block geometry, field layout and CPU codec.
//!
//! Each format is one line of `for_each_format!`, one Rust module named after it
//! (`src/formats/<family>/<name>.rs`) and, for the GPU, one WGSL file with the same stem. Nothing else
//! in the crate matches over every format by hand.

pub mod common;
pub mod field;
#[cfg(target_arch = "x86_64")]
pub(crate) mod lines;
pub(crate) mod permute;
pub mod sample;
pub mod tables;

pub mod float;
pub mod fp4;
pub mod int;
pub mod iquant;
pub mod kquant;
pub mod legacy;
pub mod ternary;

use field::Field;

/// The one list of formats: `(ggml name, ggml type id, codec module, GPU facts)`, in id order.
///
/// The GPU facts are `cpu_only`, or `shader` with optional `(tables [..], libs [..])`: the
/// shader is `shaders/formats/<stem>.wgsl`, where `<stem>` is the codec module's name (so
/// `src/formats/kquant/q4_k.rs` and `shaders/formats/q4_k.wgsl` are twins), composed with the
/// lookup tables `shaders/tables/<table>.wgsl` and the family helpers `shaders/lib/<lib>.wgsl`
/// it names. `crate::gpu::shaders` expands this same list into the composed sources.
macro_rules! for_each_format {
    ($m:ident) => {
        $m! {
            (F32, 0, float::f32, shader),
            (F16, 1, float::f16, shader),
            (Q4_0, 2, legacy::q4_0, shader),
            (Q4_1, 3, legacy::q4_1, shader),
            (Q5_0, 6, legacy::q5_0, shader),
            (Q5_1, 7, legacy::q5_1, shader),
            (Q8_0, 8, legacy::q8_0, shader),
            (Q8_1, 9, legacy::q8_1, shader),
            (Q2_K, 10, kquant::q2_k, shader),
            (Q3_K, 11, kquant::q3_k, shader),
            (Q4_K, 12, kquant::q4_k, shader(libs ["kquant"])),
            (Q5_K, 13, kquant::q5_k, shader(libs ["kquant"])),
            (Q6_K, 14, kquant::q6_k, shader),
            (Q8_K, 15, kquant::q8_k, shader),
            (IQ2_XXS, 16, iquant::iq2_xxs, shader(tables ["iq_grids"], libs ["iquant", "grid_parts"])),
            (IQ2_XS, 17, iquant::iq2_xs, shader(tables ["iq_grids"], libs ["iquant", "grid_parts"])),
            (IQ3_XXS, 18, iquant::iq3_xxs, shader(tables ["iq_grids"], libs ["iquant", "grid_parts"])),
            (IQ1_S, 19, iquant::iq1_s, shader(tables ["iq_grids"], libs ["iquant", "delta_parts"])),
            (IQ4_NL, 20, iquant::iq4_nl, shader(tables ["kvalues_iq4nl"], libs ["lookup"])),
            (IQ3_S, 21, iquant::iq3_s, shader(tables ["iq_grids"], libs ["iquant", "grid_parts"])),
            (IQ2_S, 22, iquant::iq2_s, shader(tables ["iq_grids"], libs ["iquant", "grid_parts"])),
            (IQ4_XS, 23, iquant::iq4_xs, shader(tables ["kvalues_iq4nl"], libs ["lookup"])),
            (I8, 24, int::i8, cpu_only),
            (I16, 25, int::i16, cpu_only),
            (I32, 26, int::i32, cpu_only),
            (I64, 27, int::i64, cpu_only),
            (F64, 28, float::f64, cpu_only),
            (IQ1_M, 29, iquant::iq1_m, shader(tables ["iq_grids"], libs ["iquant", "delta_parts"])),
            (BF16, 30, float::bf16, shader),
            (TQ1_0, 34, ternary::tq1_0, shader),
            (TQ2_0, 35, ternary::tq2_0, shader),
            (MXFP4, 39, fp4::mxfp4, shader(tables ["kvalues_fp4"])),
            (NVFP4, 40, fp4::nvfp4, shader(tables ["kvalues_fp4"], libs ["lookup"])),
            (Q1_0, 41, legacy::q1_0, shader),
            (Q2_0, 42, legacy::q2_0, shader),
            (F8_E4M3, 43, float::f8_e4m3, shader),
        }
    };
}

pub(crate) use for_each_format;

/// Type ids that ggml once assigned and has since removed, with their old names.
pub const REMOVED: &[(u32, &str)] = &[
    (4, "Q4_2"),
    (5, "Q4_3"),
    (31, "Q4_0_4_4"),
    (32, "Q4_0_4_8"),
    (33, "Q4_0_8_8"),
    (36, "IQ4_NL_4_4"),
    (37, "IQ4_NL_4_8"),
    (38, "IQ4_NL_8_8"),
];

/// Static description of one format: block geometry, field layout, CPU codec and GPU facts.
#[derive(Debug)]
pub struct FormatSpec {
    /// Elements per block.
    pub elems: usize,
    /// Bytes per block.
    pub bytes: usize,
    /// The block's named fields, in byte order (empty for one-element types).
    pub fields: &'static [Field],
    /// CPU reference decoder: whole blocks of `src` into `dst`, where
    /// `dst.len() == src.len() / bytes * elems`.
    pub dequant_row: fn(&[u8], &mut [f32]),
    /// The same decode into little-endian f16 bits, each value rounded as it is decoded
    /// (bit-identical to rounding `dequant_row`'s output with `half`).
    pub dequant_row_f16: fn(&[u8], &mut [[u8; 2]]),
    /// The same decode into little-endian bf16 bits, likewise.
    pub dequant_row_bf16: fn(&[u8], &mut [[u8; 2]]),
    /// The format's WGSL shader, or `None` when it is decoded on the CPU only.
    pub gpu: Option<GpuSpec>,
}

/// What a format's WGSL shader is made of (the composed source: `crate::gpu::shaders::source`).
#[derive(Debug, PartialEq, Eq)]
pub struct GpuSpec {
    /// File stem of the shader (`shaders/formats/<stem>.wgsl`) and of the CPU codec module.
    pub stem: &'static str,
    /// Lookup tables composed in from `shaders/tables/` (`iq_grids`: the i-quant grids, bound as
    /// a storage buffer; the others are WGSL constants).
    pub tables: &'static [&'static str],
    /// Family helpers composed in from `shaders/lib/`, besides the ones every shader has.
    pub libs: &'static [&'static str],
}

impl GpuSpec {
    /// Whether the shader reads the i-quant grid buffer (the `iq_grids` table).
    pub const fn binds_grids(&self) -> bool {
        let mut i = 0;
        while i < self.tables.len() {
            if str_eq(self.tables[i], "iq_grids") {
                return true;
            }
            i += 1;
        }
        false
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A registry line's GPU facts as an `Option<GpuSpec>`.
macro_rules! gpu_spec {
    ($stem:ident, cpu_only) => {
        None
    };
    ($stem:ident, shader $(( $(tables [$($table:literal),*])? $(,)? $(libs [$($lib:literal),*])? ))?) => {
        Some(GpuSpec {
            stem: stringify!($stem),
            tables: &[$($($($table),*)?)?],
            libs: &[$($($($lib),*)?)?],
        })
    };
}

/// Why a ggml type id is not a [`Format`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TypeIdError {
    /// The id belonged to a type that ggml removed.
    #[error("type {name} (id {id}) was removed from ggml and is not supported")]
    Removed {
        /// The type id.
        id: u32,
        /// The removed type's ggml name.
        name: &'static str,
    },
    /// The id is not in ggml's type table.
    #[error("unknown ggml type id {id}")]
    Unknown {
        /// The type id.
        id: u32,
    },
}

macro_rules! define_formats {
    ($(($name:ident, $id:literal, $family:ident::$stem:ident, $kind:ident $(($($facts:tt)*))?)),* $(,)?) => {
        /// A live ggml tensor type, named and numbered as in ggml's `enum ggml_type`.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum Format {
            $(
                #[doc = concat!("ggml `GGML_TYPE_", stringify!($name), "` (id ", stringify!($id), ").")]
                $name = $id,
            )*
        }

        impl Format {
            /// Every live format, in type-id order.
            pub const ALL: &'static [Format] = &[$(Format::$name),*];

            /// The ggml type id.
            pub const fn id(self) -> u32 {
                self as u32
            }

            /// The ggml name, e.g. `"Q4_K"`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Format::$name => stringify!($name),)*
                }
            }

            /// The format with ggml type id `id`, or why there is none.
            pub const fn from_id(id: u32) -> Result<Format, TypeIdError> {
                match id {
                    $($id => Ok(Format::$name),)*
                    _ => {
                        let mut i = 0;
                        while i < REMOVED.len() {
                            if REMOVED[i].0 == id {
                                return Err(TypeIdError::Removed { id, name: REMOVED[i].1 });
                            }
                            i += 1;
                        }
                        Err(TypeIdError::Unknown { id })
                    }
                }
            }

            /// Block geometry, layout and CPU codec.
            pub const fn spec(self) -> &'static FormatSpec {
                match self {
                    $(Format::$name => &const { FormatSpec {
                        elems: $family::$stem::ELEMS,
                        bytes: $family::$stem::BYTES,
                        fields: $family::$stem::FIELDS,
                        dequant_row: $family::$stem::dequant_row,
                        dequant_row_f16: $family::$stem::dequant_row_f16,
                        dequant_row_bf16: $family::$stem::dequant_row_bf16,
                        gpu: gpu_spec!($stem, $kind $(($($facts)*))?),
                    } },)*
                }
            }
        }
    };
}

for_each_format!(define_formats);

impl Format {
    /// Elements per block.
    pub const fn block_elems(self) -> usize {
        self.spec().elems
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        self.spec().bytes
    }

    /// Whether the format has a WGSL shader (all output dtypes); the others (F64 and the integer
    /// types) are decoded on the CPU only.
    pub const fn has_shader(self) -> bool {
        self.spec().gpu.is_some()
    }

    /// Whether the format's shader reads the i-quant grid buffer ([`GpuSpec::binds_grids`]).
    pub const fn binds_grids(self) -> bool {
        match &self.spec().gpu {
            Some(g) => g.binds_grids(),
            None => false,
        }
    }

    /// Values that `n_bytes` of this format decode to, or `None` when `n_bytes` is not a whole
    /// number of blocks.
    pub const fn values_for(self, n_bytes: usize) -> Option<usize> {
        let spec = self.spec();
        if !n_bytes.is_multiple_of(spec.bytes) {
            return None;
        }
        Some(n_bytes / spec.bytes * spec.elems)
    }

    /// The format with ggml name `name` (case-insensitive), e.g. `"q4_k"`.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// Bytes that `n_elements` values of this format occupy, or `None` when `n_elements` is not a
    /// whole number of blocks or the size overflows `u64`.
    pub const fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let elems = self.block_elems() as u64;
        if !n_elements.is_multiple_of(elems) {
            return None;
        }
        (n_elements / elems).checked_mul(self.block_bytes() as u64)
    }
}

const fn count_with_shader() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < Format::ALL.len() {
        if Format::ALL[i].has_shader() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Every format with a WGSL shader, in type-id order (generated from the registry).
pub const WITH_SHADER: &[Format] = &{
    let mut out = [Format::F32; count_with_shader()];
    let (mut i, mut n) = (0, 0);
    while i < Format::ALL.len() {
        if Format::ALL[i].has_shader() {
            out[n] = Format::ALL[i];
            n += 1;
        }
        i += 1;
    }
    out
};

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dequant_row` runs the clone for the best instruction set this CPU has (see
    /// `common::dequant_row!`); decoding block by block through `dequant_block` from a test runs
    /// the same source compiled for the baseline. Both must give the same bits.
    macro_rules! dispatched_row_equals_baseline_blocks {
        ($(($name:ident, $id:literal, $family:ident::$stem:ident, $($gpu:tt)*)),* $(,)?) => {
            #[test]
            fn dispatched_row_equals_baseline_blocks() {
                $({
                    use $family::$stem as codec;
                    let format = Format::$name;
                    for n_blocks in [1, 7, 300] {
                        let src = sample::finite_blocks(format, n_blocks, 0xD15 + $id);
                        let mut row = vec![0.0; n_blocks * codec::ELEMS];
                        codec::dequant_row(&src, &mut row);
                        let mut blocks = vec![[0.0; codec::ELEMS]; n_blocks];
                        for (b, y) in src.chunks_exact(codec::BYTES).zip(&mut blocks) {
                            codec::dequant_block(b.try_into().unwrap(), y);
                        }
                        let blocks = blocks.concat();
                        let c = crate::verify::compare(
                            crate::DType::F32,
                            bytemuck::cast_slice(&row),
                            bytemuck::cast_slice(&blocks),
                        );
                        assert_eq!(c.n_values, row.len() as u64);
                        assert_eq!(
                            c.mismatches, 0,
                            "{format}, {n_blocks} blocks: first differing value {:?}",
                            c.first_mismatch
                        );
                    }
                })*
            }
        };
    }
    for_each_format!(dispatched_row_equals_baseline_blocks);

    /// Each codec file's header names its ggml id and its GPU twin, which exists, or says that
    /// the format is CPU only, as the registry line does.
    macro_rules! codec_headers_match_the_registry {
        ($(($name:ident, $id:literal, $family:ident::$stem:ident, $($gpu:tt)*)),* $(,)?) => {
            #[test]
            fn codec_headers_match_the_registry() {
                let root = env!("CARGO_MANIFEST_DIR");
                $({
                    let format = Format::$name;
                    let stem = stringify!($stem);
                    let codec = format!("{root}/src/formats/{}/{stem}.rs", stringify!($family));
                    let head = std::fs::read_to_string(&codec).unwrap();
                    let head = head.lines().take(2).collect::<Vec<_>>().join(" ");
                    assert!(head.starts_with(&format!("//! {format} (ggml id {}", $id)), "{codec}: {head}");
                    let twin = format!("shaders/formats/{stem}.wgsl");
                    if format.has_shader() {
                        assert!(head.contains(&format!("GPU twin: {twin}")), "{codec}: {head}");
                        let wgsl = std::fs::read_to_string(format!("{root}/{twin}")).unwrap();
                        let cpu_twin = format!("CPU twin: src/formats/{}/{stem}.rs", stringify!($family));
                        assert!(wgsl.lines().take(3).any(|l| l.contains(&cpu_twin)), "{twin}");
                    } else {
                        assert!(head.contains("CPU only") && !head.contains("GPU twin"), "{codec}: {head}");
                        assert!(!std::path::Path::new(&format!("{root}/{twin}")).exists(), "{twin}");
                    }
                })*
            }
        };
    }
    for_each_format!(codec_headers_match_the_registry);
}

//! The format registry: every live ggml tensor type, its block geometry, field layout and CPU codec.
//!
//! Each format is one line of `for_each_format!`, one Rust module named after it
//! (`src/formats/<family>/<name>.rs`) and, for the GPU, one WGSL file with the same stem. Nothing else
//! in the crate matches over every format by hand.

pub mod common;
pub mod field;
pub mod tables;

pub mod float;
pub mod fp4;
pub mod int;
pub mod iquant;
pub mod kquant;
pub mod legacy;
pub mod ternary;

use field::Field;

/// The one list of formats: `(ggml name, ggml type id, module)`, in id order.
macro_rules! for_each_format {
    ($m:ident) => {
        $m! {
            (F32, 0, float::f32),
            (F16, 1, float::f16),
            (Q4_0, 2, legacy::q4_0),
            (Q4_1, 3, legacy::q4_1),
            (Q5_0, 6, legacy::q5_0),
            (Q5_1, 7, legacy::q5_1),
            (Q8_0, 8, legacy::q8_0),
            (Q8_1, 9, legacy::q8_1),
            (Q2_K, 10, kquant::q2_k),
            (Q3_K, 11, kquant::q3_k),
            (Q4_K, 12, kquant::q4_k),
            (Q5_K, 13, kquant::q5_k),
            (Q6_K, 14, kquant::q6_k),
            (Q8_K, 15, kquant::q8_k),
            (IQ2_XXS, 16, iquant::iq2_xxs),
            (IQ2_XS, 17, iquant::iq2_xs),
            (IQ3_XXS, 18, iquant::iq3_xxs),
            (IQ1_S, 19, iquant::iq1_s),
            (IQ4_NL, 20, iquant::iq4_nl),
            (IQ3_S, 21, iquant::iq3_s),
            (IQ2_S, 22, iquant::iq2_s),
            (IQ4_XS, 23, iquant::iq4_xs),
            (I8, 24, int::i8),
            (I16, 25, int::i16),
            (I32, 26, int::i32),
            (I64, 27, int::i64),
            (F64, 28, float::f64),
            (IQ1_M, 29, iquant::iq1_m),
            (BF16, 30, float::bf16),
            (TQ1_0, 34, ternary::tq1_0),
            (TQ2_0, 35, ternary::tq2_0),
            (MXFP4, 39, fp4::mxfp4),
            (NVFP4, 40, fp4::nvfp4),
            (Q1_0, 41, legacy::q1_0),
            (Q2_0, 42, legacy::q2_0),
            (F8_E4M3, 43, float::f8_e4m3),
        }
    };
}

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

/// Static description of one format: block geometry, field layout and CPU codec.
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
    /// The composed WGSL shader (f32 output) that decodes this format on the GPU, or `None` when
    /// the format is decoded on the CPU only. All output variants: [`crate::gpu::shaders::source`].
    pub wgsl: Option<&'static str>,
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
    ($(($name:ident, $id:literal, $($module:ident)::+)),* $(,)?) => {
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
                        elems: $($module)::+::ELEMS,
                        bytes: $($module)::+::BYTES,
                        fields: $($module)::+::FIELDS,
                        dequant_row: $($module)::+::dequant_row,
                        wgsl: crate::gpu::shaders::source(Format::$name, crate::DType::F32),
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
        ($(($name:ident, $id:literal, $($module:ident)::+)),* $(,)?) => {
            #[test]
            fn dispatched_row_equals_baseline_blocks() {
                $({
                    use $($module)::+ as codec;
                    let format = Format::$name;
                    for n_blocks in [1, 7, 300] {
                        let src = crate::selftest::finite_blocks(format, n_blocks, 0xD15 + $id);
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
}

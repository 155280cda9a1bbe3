//! Compile-time assembly of the WGSL shaders (design §2): every shader is a `&'static str` built
//! with `concat!(include_str!(..))` from the shared helpers in `shaders/lib/` (`bytes`, `int8`, `float`, `half`,
//! then any family helpers the format names with `libs [..]`, e.g. `kquant`), the lookup tables a
//! format names in `shaders/tables/`, the format's own `shaders/formats/<stem>.wgsl`, one output
//! packer (`out_f32`, or `out_f16` / `out_bf16` with the shared `store_pairs`) and the shared entry
//! point. No helper is copied into a format file.
//!
//! The sources are expanded from the format registry (`crate::formats`): a line marked `shader`
//! gets one composed source per output dtype from its file stem, tables and helper files; a line
//! marked `cpu_only` gets none.
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
//! their `libs ["kquant"]` registry entry, which any family helper file can use. A format that wants another
//! mapping ships its own entry file instead of `lib/entry.wgsl`, keeping the bindings and the
//! `Params` struct. Grids go into `shaders/tables/<name>.wgsl` (u64 entries as lo/hi u32 pairs),
//! generated from `formats::tables` and checked like `KVALUES_*` in `tests/cpu/shaders_layout_sync.rs`;
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
    ($stem:ident, [$($lib:literal),*], [$($table:literal),*], [$($out:literal),+]) => {
        concat!(
            "// ---- shaders/lib/bytes.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/bytes.wgsl")),
            "// ---- shaders/lib/int8.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/int8.wgsl")),
            "// ---- shaders/lib/float.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/float.wgsl")),
            "// ---- shaders/lib/half.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/half.wgsl")),
            $(
                "// ---- shaders/lib/", $lib, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/", $lib, ".wgsl")),
            )*
            $(
                "// ---- shaders/tables/", $table, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/tables/", $table, ".wgsl")),
            )*
            "// ---- shaders/formats/", stringify!($stem), ".wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/formats/", stringify!($stem), ".wgsl")),
            $(
                "// ---- shaders/lib/", $out, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/", $out, ".wgsl")),
            )+
            "// ---- shaders/lib/entry.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/entry.wgsl")),
        )
    };
}

/// One registry line's decoder alone (helpers, tables, the format file), or `None`.
macro_rules! decoder {
    ($stem:ident, cpu_only) => {
        None
    };
    ($stem:ident, shader $(( $(tables [$($table:literal),*])? $(,)? $(libs [$($lib:literal),*])? ))?) => {
        Some(concat!(
            "// ---- shaders/lib/bytes.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/bytes.wgsl")),
            "// ---- shaders/lib/int8.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/int8.wgsl")),
            "// ---- shaders/lib/float.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/float.wgsl")),
            "// ---- shaders/lib/half.wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/half.wgsl")),
            $($($(
                "// ---- shaders/lib/", $lib, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/lib/", $lib, ".wgsl")),
            )*)?)?
            $($($(
                "// ---- shaders/tables/", $table, ".wgsl ----\n",
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/tables/", $table, ".wgsl")),
            )*)?)?
            "// ---- shaders/formats/", stringify!($stem), ".wgsl ----\n",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/formats/", stringify!($stem), ".wgsl")),
        ))
    };
}

/// One registry line's composed source for `$dtype`, or `None` for a CPU-only format.
macro_rules! composed {
    ($stem:ident, $dtype:ident, cpu_only) => {
        None
    };
    ($stem:ident, $dtype:ident, shader $(( $(tables [$($table:literal),*])? $(,)? $(libs [$($lib:literal),*])? ))?) => {
        Some(match $dtype {
            DType::F32 => compose!($stem, [$($($($lib),*)?)?], [$($($($table),*)?)?], ["out_f32"]),
            DType::F16 => compose!($stem, [$($($($lib),*)?)?], [$($($($table),*)?)?], ["out_f16", "store_pairs"]),
            DType::BF16 => compose!($stem, [$($($($lib),*)?)?], [$($($($table),*)?)?], ["out_bf16", "store_pairs"]),
        })
    };
}

macro_rules! sources {
    ($(($name:ident, $id:literal, $family:ident::$stem:ident, $kind:ident $(($($facts:tt)*))?)),* $(,)?) => {
        /// The composed WGSL that decodes `format` to `dtype`, or `None` when `format` has no
        /// shader (it is then decoded on the CPU).
        pub const fn source(format: Format, dtype: DType) -> Option<&'static str> {
            match format {
                $(Format::$name => composed!($stem, dtype, $kind $(($($facts)*))?),)*
            }
        }

        /// The WGSL that decodes `format`'s blocks, for composing into your own shaders; `None` for a
        /// format without a shader ([`Format::has_shader`]).
        ///
        /// It is the engine's own shader up to (not including) its output packer and entry point: the
        /// shared helpers (`shaders/lib/bytes.wgsl`, `float.wgsl`, `half.wgsl`), the format's lookup tables and
        /// `shaders/formats/<format>.wgsl`. It declares the constants `BLOCK_ELEMS` and `BLOCK_BYTES`
        /// and
        ///
        /// ```wgsl
        /// fn dequant8(base: u32, part: u32) -> array<vec4<u32>, 2>
        /// ```
        ///
        /// which returns the **f32 bit patterns** (`bitcast<f32>` them) of values `8 * part .. 8 * part
        /// + 8` of the block whose first byte is at byte offset `base` of `tile`. For one-value formats
        /// (`BLOCK_ELEMS == 1`: F32, F16, BF16, F8_E4M3) `part` is 0 and the 8 values are those of the 8
        /// consecutive elements from `base` on. The results are bit-exact with the CPU codecs.
        ///
        /// **Your part:** declare, before or after this source, a module-scope `tile: array<u32>` that
        /// holds the raw bytes, little-endian, e.g. a raw resident tensor bound directly:
        ///
        /// ```wgsl
        /// @group(0) @binding(0) var<storage, read> tile: array<u32>; // a raw ResidentTensor's buffer
        /// ```
        ///
        /// (or a `var<workgroup> tile: array<u32, N>` you fill first). Reads may touch the word after a
        /// block's last byte, which the resident buffers' 4-byte padding provides. Avoid the names the
        /// source declares: its functions (`load_u8`, `load_u32`, `f16_le`, `dequant8`, ...) and
        /// constants (`BLOCK_ELEMS`, `BLOCK_BYTES`, names prefixed with the format, `EXP_MASK_F32`,
        /// `MANT_MASK_F32`, the `KVALUES_*` tables, and for IQ4_NL, IQ4_XS and NVFP4
        /// `KVALUES`, `lookup4_f32`, `lookup4_i8`, `lookup_begin`). Offsets are u32: bind at most 4 GiB.
        ///
        /// The i-quants with grids (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) also declare
        /// `@group(0) @binding(3) var<storage, read> grids: array<u32>;`: bind a read-only storage buffer
        /// holding [`crate::gpu::tables::words`] there (or rename the binding in the source you compose).
        ///
        /// ```
        /// use gguf_dequant::gpu::shaders::wgsl_decode_source;
        /// use gguf_dequant::Format;
        ///
        /// let decode = wgsl_decode_source(Format::Q4_0).expect("Q4_0 has a shader");
        /// let my_shader = format!(
        ///     "@group(0) @binding(0) var<storage, read> tile: array<u32>;\n\
        ///      @group(0) @binding(1) var<storage, read_write> out: array<f32>;\n\
        ///      {decode}\n\
        ///      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n\
        ///          let block = id.x / 4u; let part = id.x % 4u;\n\
        ///          if (block >= arrayLength(&out) / BLOCK_ELEMS) {{ return; }}\n\
        ///          let v = dequant8(block * BLOCK_BYTES, part);\n\
        ///          for (var i = 0u; i < 8u; i++) {{\n\
        ///              out[block * BLOCK_ELEMS + part * 8u + i] = bitcast<f32>(v[i / 4u][i % 4u]);\n\
        ///          }}\n\
        ///      }}"
        /// );
        /// assert!(my_shader.contains("fn dequant8"));
        /// ```
        pub const fn wgsl_decode_source(format: Format) -> Option<&'static str> {
            match format {
                $(Format::$name => decoder!($stem, $kind $(($($facts)*))?),)*
            }
        }
    };
}

crate::formats::for_each_format!(sources);

/// Values each invocation of the shared entry point decodes (`VALS` in `entry.wgsl`).
pub const VALS_PER_INVOCATION: u64 = 8;
/// Invocations per workgroup (`WG_SIZE` in `entry.wgsl`).
pub const WORKGROUP_SIZE: u64 = 64;
/// Values per workgroup.
pub const VALS_PER_WORKGROUP: u64 = VALS_PER_INVOCATION * WORKGROUP_SIZE;

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry's `shader` lines, and only those, have a composed source for every dtype;
    /// the CPU-only formats are the plain integers and F64.
    #[test]
    fn sources_follow_the_registry() {
        for &f in Format::ALL {
            for dtype in DType::ALL {
                assert_eq!(source(f, dtype).is_some(), f.has_shader(), "{f} {dtype}");
            }
        }
        let with: Vec<Format> = Format::ALL
            .iter()
            .copied()
            .filter(|f| f.has_shader())
            .collect();
        assert_eq!(crate::formats::WITH_SHADER, with.as_slice());
        let cpu_only: Vec<&str> = Format::ALL
            .iter()
            .filter(|f| !f.has_shader())
            .map(|f| f.name())
            .collect();
        assert_eq!(cpu_only, ["I8", "I16", "I32", "I64", "F64"]);
        for f in [Format::IQ2_XXS, Format::IQ1_M, Format::IQ3_S] {
            assert!(f.binds_grids(), "{f}");
        }
        for f in [Format::Q4_K, Format::IQ4_NL, Format::IQ4_XS, Format::MXFP4] {
            assert!(!f.binds_grids(), "{f}");
        }
    }

    #[test]
    fn decode_source_for_every_shader_format() {
        for &f in Format::ALL {
            let src = wgsl_decode_source(f);
            assert_eq!(src.is_some(), f.has_shader(), "{f}");
            if let Some(s) = src {
                assert!(source(f, DType::F32).unwrap().starts_with(s), "{f}");
                assert!(s.contains("fn dequant8") && !s.contains("@compute"), "{f}");
                assert!(!s.contains("fn store8"), "{f}");
                // Only the i-quant grid table is bound, at binding 3, as documented.
                let bindings = s.matches("@binding").count();
                let grids =
                    s.contains("@group(0) @binding(3) var<storage, read> grids: array<u32>;");
                assert_eq!(bindings, usize::from(grids), "{f}");
            }
        }
    }
}

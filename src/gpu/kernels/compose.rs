//! The kernels' one key ([`KernelKey`]: the op, the weight's format and the variant) and what
//! every family shares: the bindings a key declares, its workgroup size and constants, and the
//! pieces of WGSL all kernels compose (the format's decode module with prefix `w_`, blocks in
//! `w`, grids in `grids`; `one_value8`). Each family composes the rest in its own file
//! ([`super::family`]). Pure strings: no wgpu, so every variant is validated where no adapter
//! exists.

use super::family::{get_rows, matmul, matvec, matvec_id};
use super::{binding, Buf, Op, Precision, StorageBinding, GET_ROWS_VALUES, WORKGROUP_SIZE};
use crate::gpu::decode::{decode_prefixed, DecodeNames, Swaps};
use crate::{Format, Result};

/// One compiled kernel: the weight's format and the kernel's family with its variant there.
/// Each family's variant type lives in its file ([`super::family`]); build keys with the
/// families' constructors and rules, so equal kernels have equal keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelKey {
    /// The weight's format (one with a shader).
    pub format: Format,
    /// The family and its variant.
    pub variant: Variant,
}

/// A kernel's family ([`Op`]) and its variant in that family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// get_rows ([`get_rows::GetRows`]: the output dtype).
    GetRows(get_rows::GetRows),
    /// matvec ([`matvec::MatVec`]: columns, mapping, readers, reduction, loop, precision).
    MatVec(matvec::MatVec),
    /// The tiled matmul ([`matmul::MatMul`]).
    MatMul(matmul::MatMul),
    /// matvec_id: the classic matvec's variants at one column, summing `exact`.
    MatVecId(matvec::MatVec),
}

impl KernelKey {
    /// The kernel's op (its family).
    pub const fn op(&self) -> Op {
        match self.variant {
            Variant::GetRows(_) => Op::GetRows,
            Variant::MatVec(_) => Op::MatVec,
            Variant::MatMul(_) => Op::MatMul,
            Variant::MatVecId(_) => Op::MatVecId,
        }
    }

    /// The matvec variant of a matvec or matvec_id key; `None` for the other families.
    pub const fn matvec_variant(&self) -> Option<matvec::MatVec> {
        match self.variant {
            Variant::MatVec(v) | Variant::MatVecId(v) => Some(v),
            Variant::GetRows(_) | Variant::MatMul(_) => None,
        }
    }

    /// How the kernel sums ([`Precision`]): a matvec's mode, `exact` for every other kernel.
    pub const fn precision(&self) -> Precision {
        match self.matvec_variant() {
            Some(v) => v.precision,
            None => Precision::Exact,
        }
    }

    /// The names of `keys` (their `Display`) joined by ` + `: how reports write the kernels one
    /// call ran ([`crate::gpu::GpuEngine::kernels_for`]).
    pub fn names(keys: &[KernelKey]) -> String {
        keys.iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// Every kernel the engine can compile: each family's variants ([`super::family`]) for
    /// each format with a shader.
    pub fn all() -> Vec<KernelKey> {
        let mut out = Vec::new();
        for &format in crate::formats::WITH_SHADER {
            for &op in Op::ALL {
                match op {
                    Op::GetRows => out.extend(get_rows::keys(format)),
                    Op::MatVec => out.extend(matvec::keys(format)),
                    Op::MatMul => out.extend(matmul::keys(format)),
                    Op::MatVecId => out.extend(matvec_id::keys(format)),
                }
            }
        }
        out
    }

    /// The group-0 storage bindings this variant declares, in binding order: its family's
    /// ([`Op::bindings`]), less the grids for a format without them and the vec4 views of x
    /// and of the weight where the variant reads a word per load.
    pub fn bindings(&self) -> impl Iterator<Item = StorageBinding> + '_ {
        let v = self.matvec_variant();
        self.op()
            .bindings()
            .iter()
            .copied()
            .filter(move |b| match b.buf {
                Buf::Grids => self.format.binds_grids(),
                Buf::XV => v.is_some_and(|v| v.vec_x),
                Buf::WV => v.is_some_and(|v| v.vec_w),
                _ => true,
            })
    }

    /// The compute entry point.
    pub fn entry_point(&self) -> &'static str {
        self.op().name()
    }

    /// Invocations per workgroup (`@workgroup_size`, the WGSL's `WG`).
    pub const fn workgroup_size(&self) -> u32 {
        match self.matvec_variant() {
            Some(v) => v.workgroup_size(),
            None => WORKGROUP_SIZE,
        }
    }

    /// Weight rows one workgroup computes (matvec, matvec_id; 0 for the other ops).
    pub const fn rows_per_group(&self) -> u32 {
        match self.matvec_variant() {
            Some(v) => v.rows_per_group(),
            None => 0,
        }
    }

    /// The named `u32` constants of the composed WGSL that the Rust side plans with (checked
    /// against the WGSL by `tests/cpu/kernel_abi.rs`).
    pub fn consts(&self) -> Vec<(&'static str, u32)> {
        let mut out = vec![("WG", self.workgroup_size())];
        match self.variant {
            Variant::GetRows(_) => out.push(("VALUES", GET_ROWS_VALUES)),
            Variant::MatMul(_) => out.extend(matmul::consts()),
            Variant::MatVec(v) | Variant::MatVecId(v) => out.extend(v.consts()),
        }
        out
    }
}

/// `matvec.Q4_K.c1.t32.u4.vx.sg`, `matvec_id.Q4_K.t32.u4.vx.sg`, `get_rows.Q4_K.f16`,
/// `matmul.Q4_K`: the op, the format and the family's variant; file-name safe.
impl std::fmt::Display for KernelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.op().name(), self.format.name())?;
        match &self.variant {
            Variant::GetRows(v) => write!(f, "{v}"),
            Variant::MatVec(v) => write!(f, "{v}"),
            Variant::MatVecId(v) => v.write(f, false),
            Variant::MatMul(v) => write!(f, "{v}"),
        }
    }
}

/// The WGSL of `key`, composed by its family ([`super::family`]): the variant's constants, the
/// grids binding where the format reads it, the format's decode module (prefix `w_`), the
/// helpers the family reads rows with and the kernel file. Errors: a format without a shader.
pub fn kernel_source(key: &KernelKey) -> Result<String> {
    match &key.variant {
        Variant::GetRows(v) => get_rows::source(key.format, v),
        Variant::MatMul(_) => matmul::source(key.format),
        Variant::MatVec(v) | Variant::MatVecId(v) => matvec::source(key.format, key.op(), v),
    }
}

/// The decode module of `format` with the kernels' names (prefix `w_`, blocks in `w`,
/// grids in `grids`) and `packer` (get_rows' output packer) composed in, with the shared pieces
/// `swaps` names swapped (the matvec kernels': binary16 by the device's `unpack2x16float`,
/// [`matvec::MatVec::hw_f16`]; tables in workgroup memory on the rows mapping).
pub(super) fn module(format: Format, packer: &str, swaps: Swaps) -> Result<String> {
    let names = DecodeNames {
        prefix: "w_",
        blocks: "w",
        grids: "grids",
    };
    decode_prefixed(format, packer, &names, swaps)
}

/// The grids binding's declaration in `op`'s numbering where `format` reads the grids, else
/// nothing.
pub(super) fn grids(format: Format, op: Op) -> String {
    match StorageBinding::number(op.bindings(), Buf::Grids) {
        Some(b) if format.binds_grids() => format!(
            "@group({}) @binding({b}) var<storage, read> grids: array<u32>;\n",
            binding::STORAGE_GROUP
        ),
        _ => String::new(),
    }
}

/// The common prefix of a kernel of `op` without matvec's pieces (get_rows, matmul): the
/// grids, the decode module with `packer`, `one_value8` and `rows.wgsl`, then the kernel file.
pub(super) fn plain_source(format: Format, op: Op, packer: &str) -> Result<String> {
    Ok(format!(
        "{}{}\n{}\n{}\n\n\n\n\n{}\n",
        grids(format, op),
        module(format, packer, Swaps::default())?,
        one_value8(None),
        kernel_file!("rows"),
        op.wgsl()
    ))
}

/// The formats with an integer matvec path (a `qpart8` beside `dequant8` in their shader), each
/// with whether its parts have an offset (`QPART8_MIN`: values `d·q + m`, else `d·q`).
pub const INT_DOT_FORMATS: &[(Format, bool)] = &[
    (Format::Q4_0, false),
    (Format::Q4_1, true),
    (Format::Q5_0, false),
    (Format::Q5_1, true),
    (Format::Q8_0, false),
    (Format::Q2_K, true),
    (Format::Q3_K, false),
    (Format::Q4_K, true),
    (Format::Q5_K, true),
    (Format::Q6_K, false),
    (Format::IQ2_XXS, false),
    (Format::IQ2_XS, false),
    (Format::IQ3_XXS, false),
    (Format::IQ1_S, false),
    (Format::IQ4_NL, false),
    (Format::IQ3_S, false),
    (Format::IQ2_S, false),
    (Format::IQ4_XS, false),
    (Format::IQ1_M, false),
    (Format::TQ1_0, false),
    (Format::TQ2_0, false),
    (Format::Q1_0, false),
    (Format::Q2_0, false),
];

/// For a format with an integer matvec path, whether its parts have an offset; else `None`.
pub const fn int_dot_min(format: Format) -> Option<bool> {
    let mut i = 0;
    while i < INT_DOT_FORMATS.len() {
        if INT_DOT_FORMATS[i].0 as u32 == format as u32 {
            return Some(INT_DOT_FORMATS[i].1);
        }
        i += 1;
    }
    None
}

/// The WGSL of the integer path's x quantiser (`quantize_q8.wgsl`, entry `quantize_q8`, with
/// the packing helpers of `shaders/lib/int8.wgsl`): its bindings
/// [`matvec::QUANTIZE_BINDINGS`], [`super::params::QuantizeParams`] in group 1.
pub fn quantize_source() -> String {
    format!("{}\n{}", lib_file!("int8"), kernel_file!("quantize_q8"))
}

/// `one_value8`, the reader of rows.wgsl's `chunk8` for a one-value format: the format's
/// `dequant8` at the chunk's byte, or with `wv`, the number of the weight's vec4 view
/// ([`matvec::MatVec::vec_w`]), one vec4 load of that binding through the format's
/// `dequant8_words` (llvmpipe and SwiftShader pay per load, and a u32 load there is a loop over
/// the SIMD lanes).
pub(super) fn one_value8(wv: Option<u32>) -> String {
    let Some(wv) = wv else {
        return "fn one_value8(byte: u32) -> array<vec4<u32>, 2> {\n    return w_dequant8(byte, 0u);\n}\n".into();
    };
    format!(
        "@group({}) @binding({wv}) var<storage, read> wv: array<vec4<u32>>;\n\n// The 8 values at byte `byte` (a multiple of 16) of the weight.\nfn one_value8(byte: u32) -> array<vec4<u32>, 2> {{\n    return w_dequant8_words(wv[byte / 16u]);\n}}\n",
        binding::STORAGE_GROUP
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    /// The matvec variant of a matvec or matvec_id key.
    fn mv(key: KernelKey) -> matvec::MatVec {
        key.matvec_variant().unwrap()
    }
    use crate::gpu::kernels::{
        MATVEC_MAX_BATCH, MATVEC_THREADS, ROWS_MAX_SLOT_CHUNKS, ROWS_MAX_SUMS, ROWS_PER_GROUP,
        ROWS_SLOTS, ROWS_WORKGROUPS, X_LANES,
    };

    #[test]
    fn keys_cover_every_variant_once() {
        let all = KernelKey::all();
        // Every thread count but 1 also has the subgroup reduction, and both unrolled; 1 has
        // shared x.
        let reductions = 2 * MATVEC_THREADS.len() - 1;
        let matvecs = (reductions + 2 * (MATVEC_THREADS.len() - 1) + X_LANES.len()) * 2;
        // The rows mapping: (columns, rows, slot) with rows × columns <= 16 and rows × slot
        // <= 8, both reductions, and below 4 chunks per slot step also unrolled; every
        // workgroup size, both x readers.
        let rows_variants: usize = (1..=MATVEC_MAX_BATCH)
            .flat_map(|c| ROWS_PER_GROUP.map(move |r| (c, r)))
            .filter(|&(c, r)| c * r <= ROWS_MAX_SUMS)
            .flat_map(|(_, r)| ROWS_SLOTS.map(move |s| r * s))
            .filter(|&chunks| chunks <= ROWS_MAX_SLOT_CHUNKS)
            .map(|chunks| if chunks < 4 { 4 } else { 2 })
            .sum::<usize>()
            * ROWS_WORKGROUPS.len()
            * 2;
        // F16 and BF16 have each matvec twice: a word, or four words of the weight per load.
        let per_format = |f: &Format| {
            let readers = if matches!(f, Format::F16 | Format::BF16) {
                2
            } else {
                1
            };
            // Every matvec and matvec_id variant twice where the format reads binary16: the
            // integer conversion and the device's.
            let conversions = if matvec::reads_f16(*f) { 2 } else { 1 };
            DType::ALL.len() + 1 + conversions * readers * (9 * matvecs + matvecs + rows_variants)
        };
        // The integer path: every columns × threads, and the subgroup reduction for threads > 1,
        // and the rows mapping with one x reader (x's codes); the factored sums: every matvec but
        // shared x, on both mappings.
        let factored = (1 + 4 * (MATVEC_THREADS.len() - 1)) * 2;
        let int = 9 * reductions + 9 * factored + rows_variants + rows_variants / 2;
        let want: usize = crate::formats::WITH_SHADER
            .iter()
            .map(per_format)
            .sum::<usize>()
            + INT_DOT_FORMATS.len() * int * 2;
        assert!(INT_DOT_FORMATS.iter().all(|&(f, _)| matvec::reads_f16(f)));
        assert_eq!(all.len(), want);
        assert!(all
            .iter()
            .any(|k| k.op() == Op::MatVecId && mv(*k).vec_w && mv(*k).x_lanes == 8));
        let unique: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len());
    }

    /// The rows mapping's slots lie in one block: every block format has a multiple of 4
    /// parts of 8 values (the largest slot).
    #[test]
    fn slots_lie_in_one_block() {
        for &f in crate::formats::WITH_SHADER {
            let elems = f.block_elems() as u32;
            assert!(elems == 1 || elems.is_multiple_of(8 * 4), "{f}: {elems}");
        }
        assert_eq!(ROWS_SLOTS.iter().max(), Some(&4));
    }

    #[test]
    fn int_dot_formats_are_those_with_qpart8() {
        for &f in crate::formats::WITH_SHADER {
            let src = crate::gpu::shaders::wgsl_decode_source(f).unwrap();
            let min = if src.contains("const QPART8_MIN: bool = true;") {
                Some(true)
            } else if src.contains("const QPART8_MIN: bool = false;") {
                Some(false)
            } else {
                None
            };
            assert_eq!(min.is_some(), src.contains("fn qpart8("), "{f}");
            assert_eq!(int_dot_min(f), min, "{f}");
        }
        let key = KernelKey::matvec(Format::Q4_K, 2, 8, true).with_precision(Precision::Int8);
        assert!(key.precision() == Precision::Int8 && !key.matvec_variant().unwrap().vec_x);
        assert_eq!(
            key.bindings().map(|b| b.buf).collect::<Vec<_>>(),
            [Buf::W, Buf::X, Buf::Y]
        );
        let s = kernel_source(&key).unwrap();
        assert!(s.contains("dot4I8Packed(q.x, x0)") && s.contains("fn w_qpart8("));
        assert_eq!(
            KernelKey::matvec(Format::MXFP4, 1, 1, false)
                .with_precision(Precision::Int8)
                .precision(),
            Precision::Exact
        );
        assert_eq!(
            KernelKey::matvec_id(Format::Q4_K, 1, false)
                .with_precision(Precision::Int8)
                .precision(),
            Precision::Exact
        );
    }

    /// `reads_f16` is true exactly for the formats whose decoder converts binary16; their
    /// `hw_f16` keys compose `unpack2x16float` in place of the integer conversion.
    #[test]
    fn hw_f16_keys_unpack() {
        for &f in crate::formats::WITH_SHADER {
            let src = crate::gpu::shaders::wgsl_decode_source(f).unwrap();
            let body = src.split("// ---- shaders/formats/").nth(1).unwrap();
            let reads = body.contains("f16_le(")
                || body.contains("f16_bits(")
                || body.contains("f16x2_bits(")
                || body.contains("f16_to_f32_bits(");
            assert_eq!(matvec::reads_f16(f), reads, "{f}");
            let key = KernelKey::matvec(f, 1, 1, true).with_hw_f16(true);
            assert_eq!(key.uses_unpack_f16(), reads, "{f}");
            let s = kernel_source(&key).unwrap();
            assert_eq!(s.contains("unpack2x16float("), reads, "{f}");
            assert!(!s.contains("firstLeadingBit(a)") || !reads, "{f}");
            if reads {
                assert!(key.to_string().ends_with(".hf"), "{key}");
            }
        }
        // Never in the bit-exact kernels.
        let s = kernel_source(&KernelKey::get_rows(Format::F16, DType::F32)).unwrap();
        assert!(!s.contains("unpack2x16float(") && s.contains("firstLeadingBit(a)"));
        let id = KernelKey::matvec_id(Format::Q4_K, 32, true).with_hw_f16(true);
        assert!(id.uses_unpack_f16() && kernel_source(&id).unwrap().contains("unpack2x16float("));
    }

    /// The formats with a 16-entry code table look it up through `lookup.wgsl`; the GPU-shaped
    /// matvec variants (rows mapping, several invocations per row) read it from workgroup
    /// memory, the others and every bit-exact kernel from the constant; every matvec entry point
    /// can call `w_lookup_begin`.
    #[test]
    fn lookup_tables_in_workgroup_memory_on_gpu_variants() {
        let tabled = [Format::IQ4_NL, Format::IQ4_XS, Format::NVFP4];
        for &f in crate::formats::WITH_SHADER {
            assert_eq!(
                crate::gpu::decode::uses_lookup(f),
                tabled.contains(&f),
                "{f}"
            );
            let rows = KernelKey::matvec_rows(f, 1, 64, 2, false).unwrap();
            for (key, wg) in [
                (rows, true),
                (rows.with_precision(Precision::Int8), true),
                (KernelKey::matvec(f, 2, 32, false), true),
                (KernelKey::matvec_id(f, 64, false), true),
                (KernelKey::matvec(f, 1, 1, true), false),
                (KernelKey::matvec_id(f, 1, false), false),
            ] {
                assert_eq!(key.matvec_variant().unwrap().lookup_wg(), wg, "{key}");
                let s = kernel_source(&key).unwrap();
                assert!(s.contains("fn w_lookup_begin("), "{key}");
                assert_eq!(
                    s.contains("var<workgroup> w_lookup_i8"),
                    wg && tabled.contains(&f),
                    "{key}"
                );
            }
            let s = kernel_source(&KernelKey::get_rows(f, DType::F32)).unwrap();
            assert!(!s.contains("var<workgroup> w_lookup"), "{f}");
        }
    }

    #[test]
    fn factored_keys_read_parts() {
        let f = Precision::Factored;
        for key in [
            KernelKey::matvec(Format::Q4_K, 2, 8, true).with_precision(f),
            KernelKey::matvec_rows(Format::Q4_1, 1, 64, 2, true)
                .unwrap()
                .with_precision(f),
            KernelKey::matvec(Format::Q6_K, 1, 1, false).with_precision(f),
        ] {
            assert_eq!(key.precision(), f);
            let s = kernel_source(&key).unwrap();
            assert!(s.contains("alias Chunk = vec4<u32>;") && s.contains("fn w_qpart8("));
            assert!(!s.contains("alias Chunk = array<vec4<f32>, 2>;"));
        }
        // x is not shared by lanes in factored sums; formats without parts stay exact.
        let one = KernelKey::matvec(Format::Q4_0, 1, 1, true).with_precision(f);
        assert_eq!(one.with_x_lanes(4), one);
        assert_eq!(
            KernelKey::matvec(Format::MXFP4, 1, 8, true)
                .with_precision(f)
                .precision(),
            Precision::Exact
        );
        let s = kernel_source(&KernelKey::matvec_id(Format::Q4_K, 4, false)).unwrap();
        assert!(s.contains("alias Chunk = array<vec4<f32>, 2>;"));
    }

    #[test]
    fn bindings_follow_the_variant() {
        let b = |k: KernelKey| k.bindings().map(|b| b.buf).collect::<Vec<_>>();
        use Buf::*;
        assert_eq!(b(KernelKey::matvec(Format::Q4_0, 1, 1, false)), [W, X, Y]);
        assert_eq!(
            b(KernelKey::matvec(Format::IQ2_XXS, 1, 1, true)),
            [W, X, Y, Grids, XV]
        );
        assert_eq!(
            b(KernelKey::get_rows(Format::Q4_K, DType::F16)),
            [W, Y, Ids]
        );
        assert_eq!(
            b(KernelKey::matvec_id(Format::IQ1_S, 64, false)),
            [W, X, Y, Ids, Grids]
        );
        assert_eq!(
            b(KernelKey::matvec(Format::BF16, 2, 1, true).with_vec_w(true)),
            [W, X, Y, XV, WV]
        );
        // Each family numbers its own, in binding order, each number and buffer once.
        for &op in Op::ALL {
            let t = op.bindings();
            assert!(t.windows(2).all(|p| p[0].binding < p[1].binding), "{op}");
            for (i, x) in t.iter().enumerate() {
                assert!(t[..i].iter().all(|y| y.buf != x.buf), "{op}");
                assert_eq!(StorageBinding::number(t, x.buf), Some(x.binding));
                assert_eq!(x.read_write, x.buf == Y, "{op}");
            }
        }
        assert_eq!(StorageBinding::number(Op::GetRows.bindings(), Buf::X), None);
        // Only F16 and BF16 have the four-word reader.
        assert!(!mv(KernelKey::matvec(Format::F32, 1, 1, true).with_vec_w(true)).vec_w);
        let matmul = KernelKey::matmul(Format::F16);
        assert_eq!(matmul.with_vec_w(true), matmul);
    }

    #[test]
    fn sources_carry_the_variant() {
        let s = kernel_source(&KernelKey::matvec(Format::Q4_0, 3, 16, true)).unwrap();
        assert!(s.starts_with("const B: u32 = 3u;\nconst T: u32 = 16u;\n"));
        assert!(s.contains("fn matvec(") && s.contains("var<storage, read> xv"));
        assert!(s.contains("var<workgroup> partial") && !s.contains("subgroupShuffleXor"));
        let key = KernelKey::matvec(Format::Q4_0, 3, 16, true).with_subgroups(true);
        let s = kernel_source(&key).unwrap();
        assert!(!s.contains("var<workgroup> partial") && s.contains("subgroupShuffleXor"));
        assert!(!mv(KernelKey::matvec(Format::Q4_0, 3, 1, true).with_subgroups(true)).subgroups);
        let matmul = KernelKey::matmul(Format::Q4_0);
        assert_eq!(matmul.with_subgroups(true), matmul);
        // F16 and BF16 rows of whole 16-byte chunks: one vec4 load per 8 values.
        let key = KernelKey::matvec(Format::F16, 1, 1, true).with_vec_w(true);
        let s = kernel_source(&key).unwrap();
        assert!(s.contains("var<storage, read> wv: array<vec4<u32>>"));
        assert!(s.contains("return w_dequant8_words(wv[byte / 16u]);"));
        let s = kernel_source(&KernelKey::matvec(Format::F16, 1, 1, true)).unwrap();
        assert!(s.contains("return w_dequant8(byte, 0u);") && !s.contains("wv"));
        let s = kernel_source(&KernelKey::get_rows(Format::IQ2_XXS, DType::BF16)).unwrap();
        assert!(s.contains("var<storage, read> grids") && s.contains("fn get_rows("));
        assert!(kernel_source(&KernelKey::matmul(Format::I8)).is_err());
    }

    #[test]
    fn shared_x_is_read_once_per_lane_and_broadcast() {
        let key = KernelKey::matvec(Format::Q4_K, 2, 1, false).with_x_lanes(4);
        let v = key.matvec_variant().unwrap();
        assert!(v.x_lanes == 4 && key.uses_subgroups() && !v.subgroups);
        let s = kernel_source(&key).unwrap();
        assert!(s.contains("let s1 = x[o + 4u + x_lane];") && !s.contains("s2"));
        assert!(s.contains("subgroupBroadcast(s1, 3u))") && s.contains("x_lane = l.id % XL;"));
        assert!(s.contains("@builtin(subgroup_invocation_id)") && !s.contains("xv"));
        assert!(s.contains("part_dot(acc, base, p + 3u, at, k)") && !s.contains("fn group_dot"));
        // vec4 x: a block's parts 32 values at a time, one vec4 per lane and column (4 lanes:
        // two), each part's halves broadcast from the lanes that read them.
        let s =
            kernel_source(&KernelKey::matvec(Format::Q4_K, 2, 1, true).with_x_lanes(4)).unwrap();
        assert!(s.contains("var<storage, read> xv") && s.contains("for (var g = 0u; g < 8u; g++)"));
        assert!(s.contains("let q1 = xv[o + 4u];") && s.contains("subgroupBroadcast(q1, 3u))"));
        let s =
            kernel_source(&KernelKey::matvec(Format::Q4_0, 1, 1, true).with_x_lanes(8)).unwrap();
        assert!(s.contains("group_dot(acc, base, 0u, at, k);") && !s.contains("q1"));
        // Several invocations per row read different x: nothing to share.
        let wide = KernelKey::matvec(Format::Q4_K, 2, 8, true);
        assert_eq!(wide.with_x_lanes(8), wide);
        let matmul = KernelKey::matmul(Format::Q4_K);
        assert_eq!(matmul.with_x_lanes(8), matmul);
        assert_eq!(
            mv(KernelKey::matvec_id(Format::Q4_K, 1, false).with_x_lanes(1)).x_lanes,
            1
        );
    }

    #[test]
    fn one_column_blocks_are_unrolled() {
        let unrolled = kernel_source(&KernelKey::matvec(Format::Q4_K, 1, 1, false)).unwrap();
        assert!(unrolled.contains("part_dot(acc, base, 31u, at, k);"));
        assert!(!unrolled.contains("p < 32u"));
        for key in [
            KernelKey::matvec(Format::Q4_K, 2, 1, false),
            KernelKey::matvec(Format::Q4_K, 1, 4, false),
        ] {
            let looped = kernel_source(&key).unwrap();
            assert!(looped.contains("for (var p = 0u; p < 32u; p += 4u)"));
            assert!(!looped.contains("31u, at"));
        }
    }
}

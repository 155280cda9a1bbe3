//! WGSL assembly of the kernels: a variant's constants, the weight format's decode module
//! (prefix `w_`, blocks in `w`, grids in `grids`), the row helpers, the x reader, the kernel
//! file and the matvec kernels' `block_dot`. Pure strings: no wgpu, so every variant is
//! validated where no adapter exists.

use super::{
    binding, Op, Precision, StorageBinding, GET_ROWS_VALUES, MATMUL_CPU_COLUMNS, MATMUL_TILE,
    MATVEC_MAX_BATCH, WORKGROUP_SIZE,
};
use crate::gpu::decode::{decode_prefixed, DecodeNames};
use crate::{DType, Format, Result};

/// The invocations per matvec row the engine can use (`EngineOptions::matvec_threads_per_row`):
/// the powers of two up to the workgroup.
pub const MATVEC_THREADS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Chunks per loop step of an unrolled matvec row ([`KernelKey::unroll`]).
pub const MATVEC_UNROLL: u32 = 4;

/// The invocations per workgroup of the matvec rows mapping ([`KernelKey::rows`]).
pub const ROWS_WORKGROUPS: [u32; 4] = [32, 64, 128, 256];

/// The rows per workgroup of the matvec rows mapping ([`KernelKey::rows`]).
pub const ROWS_PER_GROUP: [u32; 4] = [1, 2, 4, 8];

/// The most sums one invocation of the rows mapping holds: rows × columns
/// ([`KernelKey::rows`]; its workgroup-memory reduction keeps them all for every invocation,
/// 16 KiB at 256 invocations).
pub const ROWS_MAX_SUMS: u32 = 16;

/// The shape of the matvec rows mapping ([`KernelKey::rows`]): invocations per workgroup and
/// rows per workgroup, written `WxR` (e.g. `128x2`: 128 invocations on 2 rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowsShape {
    /// Invocations per workgroup, one of [`ROWS_WORKGROUPS`].
    pub workgroup: u32,
    /// Rows per workgroup, one of [`ROWS_PER_GROUP`]; fewer where the columns would make rows
    /// × columns exceed [`ROWS_MAX_SUMS`] ([`RowsShape::rows_for`]).
    pub rows: u32,
}

impl RowsShape {
    /// The shape `workgroup` × `rows`, where both are variants.
    pub fn new(workgroup: u32, rows: u32) -> Option<RowsShape> {
        (ROWS_WORKGROUPS.contains(&workgroup) && ROWS_PER_GROUP.contains(&rows))
            .then_some(RowsShape { workgroup, rows })
    }

    /// Rows per workgroup for `columns` columns: [`RowsShape::rows`], halved until rows ×
    /// columns is at most [`ROWS_MAX_SUMS`].
    pub const fn rows_for(&self, columns: u32) -> u32 {
        let mut r = self.rows;
        while r > 1 && r * columns > ROWS_MAX_SUMS {
            r /= 2;
        }
        r
    }
}

impl std::fmt::Display for RowsShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.workgroup, self.rows)
    }
}

impl std::str::FromStr for RowsShape {
    type Err = String;

    /// `WxR`, e.g. `128x2`.
    fn from_str(s: &str) -> std::result::Result<RowsShape, String> {
        let bad = || {
            format!(
                "matvec rows shape '{s}': expected WxR with W one of {ROWS_WORKGROUPS:?} and R one of {ROWS_PER_GROUP:?}, e.g. 128x2"
            )
        };
        let (w, r) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
        let (w, r) = (w.parse().map_err(|_| bad())?, r.parse().map_err(|_| bad())?);
        RowsShape::new(w, r).ok_or_else(bad)
    }
}

/// How matvec maps rows to invocations: what the kernel policy chooses per call (the engine's
/// default, or the tuner's choice for the call's format, K, N and columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mapping {
    /// `matvec.wgsl`: 64 invocations per workgroup, the engine's threads per row.
    Classic,
    /// `matvec_rows.wgsl` in this shape ([`KernelKey::rows`]).
    Rows(RowsShape),
}

impl std::fmt::Display for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mapping::Classic => f.write_str("classic"),
            Mapping::Rows(s) => write!(f, "rows:{s}"),
        }
    }
}

impl std::str::FromStr for Mapping {
    type Err = String;

    /// `classic` or `rows:WxR` (also `rows WxR`, or `WxR` alone).
    fn from_str(s: &str) -> std::result::Result<Mapping, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("classic") {
            return Ok(Mapping::Classic);
        }
        let shape = s
            .strip_prefix("rows")
            .map(|r| r.trim_start_matches([' ', ':', '=']))
            .unwrap_or(s);
        shape
            .parse()
            .map(Mapping::Rows)
            .map_err(|e| format!("matvec variant '{s}': expected classic or rows:WxR; {e}"))
    }
}

/// One compiled kernel: the op, the weight's format and the variant. Fields an op does not use
/// hold their defaults (columns and threads 1, scalar x, f32 out), so equal kernels have equal
/// keys; build keys with the constructors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelKey {
    /// The kernel.
    pub op: Op,
    /// The weight's format (one with a shader).
    pub format: Format,
    /// matvec: columns per dispatch (1 to [`MATVEC_MAX_BATCH`], or [`MATMUL_CPU_COLUMNS`]).
    pub columns: u32,
    /// matvec, matvec_id: invocations per row (one of [`MATVEC_THREADS`]; with
    /// [`KernelKey::rows`], the workgroup's invocations, one of [`ROWS_WORKGROUPS`]).
    pub threads: u32,
    /// matvec: 0 for the classic mapping (`matvec.wgsl`: 64 invocations per workgroup, `threads`
    /// per row, each row its own invocations), or the rows mapping for GPUs
    /// (`matvec_rows.wgsl`, as llama.cpp's `mul_mat_vec`): all `threads` invocations of a
    /// workgroup work on this many rows (one of [`ROWS_PER_GROUP`], rows × columns at most
    /// [`ROWS_MAX_SUMS`]), each chunk of x read once for them all. Other sums than the classic
    /// mapping's (another order), within the same f32 bound; a row's sums do not depend on the
    /// rows per workgroup.
    pub rows: u32,
    /// matvec, matvec_id: x read four values per load (K a multiple of 4, x 16-byte aligned).
    pub vec_x: bool,
    /// matvec, matvec_id of F16 and BF16: the weight read four words (eight values) per load
    /// (rows of whole 16-byte chunks from a 16-byte aligned start). Same values, same sums.
    pub vec_w: bool,
    /// matvec, matvec_id: a row's invocations reduce their sums with subgroup shuffles (wgpu's
    /// `SUBGROUP` feature; `threads` at most the adapter's smallest subgroup) instead of
    /// workgroup memory. Same sums, bit for bit. Never set for one invocation per row.
    pub subgroups: bool,
    /// matvec, matvec_id with one invocation per row: 1, or the lanes of a subgroup (2, 4 or 8;
    /// at most the adapter's smallest subgroup) that share each read of x: each reads one of
    /// every `x_lanes` values (with vec4 x, four of every `4 x_lanes`, a block's parts taken 32
    /// values at a time) and `subgroupBroadcast` hands them to all (every row reads the same
    /// x). Same values, same sums.
    pub x_lanes: u32,
    /// matvec, matvec_id with several invocations per row: 8-value chunks per loop step, 1 or
    /// 4 (`MATVEC_UNROLL`). Unrolled, an invocation decodes that many of its chunks (`T` apart)
    /// before it sums any, so that their loads are in flight together (a GPU waits out a
    /// memory latency per step: at 4096 × 4096 a row of 32 invocations takes 16 steps), and
    /// adds them in the same order: the same sums, bit for bit.
    pub unroll: u32,
    /// matvec: how it sums ([`Precision`]; [`KernelKey::with_precision`]). `Exact` for every
    /// other op and format. For a format in [`INT_DOT_FORMATS`]: `Factored` (either mapping;
    /// `chunk_factored.wgsl`: each part's `d·Σq·x + m·Σx`, x in f32, x not shared across
    /// lanes; bound of [`crate::ops::mul_mat_factored`]) or `Int8`, the integer path (classic
    /// mapping; `matvec_q8.wgsl`: x quantised to int8 codes beforehand, products through
    /// `dot4I8Packed`; x is then the codes and scales, not f32 values, so `vec_x`, `vec_w` and
    /// `x_lanes` are off; bound of [`crate::ops::mul_mat_int_dot`]).
    pub precision: Precision,
    /// get_rows: the output dtype.
    pub dtype: DType,
}

impl KernelKey {
    const fn base(op: Op, format: Format) -> KernelKey {
        KernelKey {
            op,
            format,
            columns: 1,
            threads: 1,
            rows: 0,
            vec_x: false,
            vec_w: false,
            subgroups: false,
            x_lanes: 1,
            unroll: 1,
            precision: Precision::Exact,
            dtype: DType::F32,
        }
    }

    /// get_rows of `format` into `dtype`.
    pub const fn get_rows(format: Format, dtype: DType) -> KernelKey {
        KernelKey {
            dtype,
            ..KernelKey::base(Op::GetRows, format)
        }
    }

    /// matvec of `columns` columns, `threads` invocations per row.
    pub const fn matvec(format: Format, columns: u32, threads: u32, vec_x: bool) -> KernelKey {
        KernelKey {
            columns,
            threads,
            vec_x,
            ..KernelKey::base(Op::MatVec, format)
        }
    }

    /// matvec of `columns` columns on the rows mapping ([`KernelKey::rows`]): `workgroup`
    /// invocations on `rows` rows. `None` where the numbers are not a variant (`workgroup` not
    /// in [`ROWS_WORKGROUPS`], `rows` not in [`ROWS_PER_GROUP`], `columns` not 1 to
    /// [`MATVEC_MAX_BATCH`], or rows × columns above [`ROWS_MAX_SUMS`]).
    pub const fn matvec_rows(
        format: Format,
        columns: u32,
        workgroup: u32,
        rows: u32,
        vec_x: bool,
    ) -> Option<KernelKey> {
        let w = matches!(workgroup, 32 | 64 | 128 | 256);
        let r = matches!(rows, 1 | 2 | 4 | 8);
        if !w || !r || columns == 0 || columns > MATVEC_MAX_BATCH || rows * columns > ROWS_MAX_SUMS
        {
            return None;
        }
        Some(KernelKey {
            rows,
            ..KernelKey::matvec(format, columns, workgroup, vec_x)
        })
    }

    /// This matvec or matvec_id key with the subgroup reduction where `on` and the key has more
    /// than one invocation per row (else unchanged).
    pub const fn with_subgroups(self, on: bool) -> KernelKey {
        KernelKey {
            subgroups: on && self.threads > 1 && matches!(self.op, Op::MatVec | Op::MatVecId),
            ..self
        }
    }

    /// This matvec or matvec_id key with x read once per `lanes` rows through subgroup
    /// broadcasts ([`KernelKey::x_lanes`]) where the key has one invocation per row and `lanes`
    /// is 2, 4 or 8 (else unchanged).
    pub const fn with_x_lanes(self, lanes: u32) -> KernelKey {
        if self.threads == 1
            && self.rows == 0
            && matches!(self.precision, Precision::Exact)
            && matches!(self.op, Op::MatVec | Op::MatVecId)
            && matches!(lanes, 2 | 4 | 8)
        {
            KernelKey {
                x_lanes: lanes,
                ..self
            }
        } else {
            self
        }
    }

    /// This matvec or matvec_id key with four chunks per loop step
    /// ([`KernelKey::unroll`]) where `on`, the key has more than one invocation per row and is
    /// not on the integer path (else unchanged). On the rows mapping, four chunks per step in
    /// all: `4 / rows` of each row (at least one).
    pub const fn with_unroll(self, on: bool) -> KernelKey {
        if on
            && self.threads > 1
            && !matches!(self.precision, Precision::Int8)
            && matches!(self.op, Op::MatVec | Op::MatVecId)
        {
            let per_row = if self.rows > 1 {
                MATVEC_UNROLL / self.rows
            } else {
                MATVEC_UNROLL
            };
            KernelKey {
                unroll: if per_row == 0 { 1 } else { per_row },
                ..self
            }
        } else {
            self
        }
    }

    /// This matvec or matvec_id key with the weight read four words per load
    /// ([`KernelKey::vec_w`]) where `on` and the format has that reader (F16, BF16; else
    /// unchanged).
    pub const fn with_vec_w(self, on: bool) -> KernelKey {
        KernelKey {
            vec_w: on
                && matches!(self.op, Op::MatVec | Op::MatVecId)
                && matches!(self.format, Format::F16 | Format::BF16),
            ..self
        }
    }

    /// This matvec key summing in `precision` ([`KernelKey::precision`]) where a kernel of it
    /// honours that mode, else unchanged (`Exact`): `Factored` for a format with parts `d·q + m`
    /// (x then read by every lane itself), `Int8` for such a format on the classic mapping (x
    /// read a value at a time and by every lane itself, one chunk per step).
    pub const fn with_precision(self, precision: Precision) -> KernelKey {
        let parts = matches!(self.op, Op::MatVec) && int_dot_min(self.format).is_some();
        match precision {
            Precision::Factored if parts => KernelKey {
                precision,
                vec_w: false,
                x_lanes: 1,
                ..self
            },
            Precision::Int8 if parts && self.rows == 0 => KernelKey {
                precision,
                vec_x: false,
                vec_w: false,
                x_lanes: 1,
                unroll: 1,
                ..self
            },
            _ => self,
        }
    }

    /// Whether the kernel uses subgroup operations (wgpu's `SUBGROUP` feature): the subgroup
    /// row reduction or shared reads of x.
    pub const fn uses_subgroups(&self) -> bool {
        self.subgroups || self.x_lanes > 1
    }

    /// The tiled matmul.
    pub const fn matmul(format: Format) -> KernelKey {
        KernelKey::base(Op::MatMul, format)
    }

    /// matvec_id, `threads` invocations per row.
    pub const fn matvec_id(format: Format, threads: u32, vec_x: bool) -> KernelKey {
        KernelKey {
            threads,
            vec_x,
            ..KernelKey::base(Op::MatVecId, format)
        }
    }

    /// Every kernel the engine can compile: each op for each format with a shader, over every
    /// variant (columns 1..=8 and [`MATMUL_CPU_COLUMNS`], every entry of [`MATVEC_THREADS`],
    /// scalar and vec4 x, F16 and BF16 weights read a word or four words per load, both row
    /// reductions, rolled and unrolled rows, x shared by 2, 4 and 8 lanes, both mappings, the
    /// factored sums and the integer path of the formats that have them, the three output
    /// dtypes).
    pub fn all() -> Vec<KernelKey> {
        let columns = (1..=MATVEC_MAX_BATCH).chain([MATMUL_CPU_COLUMNS]);
        let mut out = Vec::new();
        for &format in crate::formats::WITH_SHADER {
            for &op in Op::ALL {
                match op {
                    Op::GetRows => out.extend(DType::ALL.map(|d| KernelKey::get_rows(format, d))),
                    Op::MatMul => out.push(KernelKey::matmul(format)),
                    Op::MatVec => {
                        for c in columns.clone() {
                            for t in MATVEC_THREADS {
                                for v in [false, true] {
                                    push_matvec(&mut out, KernelKey::matvec(format, c, t, v));
                                }
                                let key = KernelKey::matvec(format, c, t, false);
                                let int = key.with_precision(Precision::Int8);
                                if int != key {
                                    out.push(int);
                                    if t > 1 {
                                        out.push(int.with_subgroups(true));
                                    }
                                    for v in [false, true] {
                                        let key = KernelKey::matvec(format, c, t, v);
                                        push_matvec(
                                            &mut out,
                                            key.with_precision(Precision::Factored),
                                        );
                                    }
                                }
                            }
                        }
                        for c in 1..=MATVEC_MAX_BATCH {
                            for wg in ROWS_WORKGROUPS {
                                for r in ROWS_PER_GROUP {
                                    for v in [false, true] {
                                        if let Some(key) =
                                            KernelKey::matvec_rows(format, c, wg, r, v)
                                        {
                                            push_rows(&mut out, key);
                                            let factored = key.with_precision(Precision::Factored);
                                            if factored != key {
                                                push_rows(&mut out, factored);
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    Op::MatVecId => {
                        for t in MATVEC_THREADS {
                            for v in [false, true] {
                                push_matvec(&mut out, KernelKey::matvec_id(format, t, v));
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The group-0 bindings this variant declares: its op's, less the grids for a format
    /// without them and the vec4 views of x and of the weight where the variant reads a word
    /// per load.
    pub fn bindings(&self) -> impl Iterator<Item = u32> + '_ {
        self.op.bindings().iter().copied().filter(|&b| match b {
            binding::GRIDS => self.format.binds_grids(),
            binding::XV => self.vec_x,
            binding::WV => self.vec_w,
            _ => true,
        })
    }

    /// How this variant declares each of its group-0 bindings, in binding order.
    pub fn storage_bindings(&self) -> impl Iterator<Item = StorageBinding> + '_ {
        self.bindings().map(|b| StorageBinding::of(self.op, b))
    }

    /// The compute entry point.
    pub fn entry_point(&self) -> &'static str {
        self.op.name()
    }

    /// Invocations per workgroup (`@workgroup_size`, the WGSL's `WG`).
    pub const fn workgroup_size(&self) -> u32 {
        if self.rows > 0 {
            self.threads
        } else {
            WORKGROUP_SIZE
        }
    }

    /// Weight rows one workgroup computes (matvec, matvec_id; 0 for the other ops).
    pub const fn rows_per_group(&self) -> u32 {
        match self.op {
            Op::MatVec | Op::MatVecId if self.rows > 0 => self.rows,
            Op::MatVec | Op::MatVecId => WORKGROUP_SIZE / self.threads,
            Op::GetRows | Op::MatMul => 0,
        }
    }

    /// The named `u32` constants of the composed WGSL that the Rust side plans with (checked
    /// against the WGSL by `tests/cpu/kernel_abi.rs`).
    pub fn consts(&self) -> Vec<(&'static str, u32)> {
        let mut out = vec![("WG", self.workgroup_size())];
        match self.op {
            Op::GetRows => out.push(("VALUES", GET_ROWS_VALUES)),
            Op::MatMul => out.extend([("TN", MATMUL_TILE), ("TB", MATMUL_TILE)]),
            Op::MatVec | Op::MatVecId if self.rows > 0 => {
                out.extend([("B", self.columns), ("R", self.rows), ("U", self.unroll)])
            }
            Op::MatVec | Op::MatVecId => out.extend([
                ("B", self.columns),
                ("T", self.threads),
                ("R", self.rows_per_group()),
            ]),
        }
        out
    }
}

/// `key` and its variants: the weight read four words per load where the format can, and
/// for each the subgroup ones (the row reduction for several invocations per row, x shared by
/// 2, 4 and 8 lanes for one) and for several invocations per row the unrolled ones.
fn push_matvec(out: &mut Vec<KernelKey>, key: KernelKey) {
    let wide = key.with_vec_w(true);
    let readers: &[KernelKey] = if wide.vec_w { &[key, wide] } else { &[key] };
    for &key in readers {
        out.push(key);
        if key.threads > 1 {
            let unrolled = key.with_unroll(true);
            out.extend([
                key.with_subgroups(true),
                unrolled,
                unrolled.with_subgroups(true),
            ]);
        } else {
            // (Only exact keys share x.)
            out.extend(
                X_LANES
                    .map(|n| key.with_x_lanes(n))
                    .into_iter()
                    .filter(|k| *k != key),
            );
        }
    }
}

/// `key` (on the rows mapping) and its variants: the weight read four words per load where the
/// format can, each with both reductions, the loop rolled and (with fewer than 4 rows)
/// unrolled.
fn push_rows(out: &mut Vec<KernelKey>, key: KernelKey) {
    let wide = key.with_vec_w(true);
    let readers: &[KernelKey] = if wide.vec_w { &[key, wide] } else { &[key] };
    for &key in readers {
        let unrolled = key.with_unroll(true);
        let loops: &[KernelKey] = if unrolled != key {
            &[key, unrolled]
        } else {
            &[key]
        };
        for &key in loops {
            out.extend([key, key.with_subgroups(true)]);
        }
    }
}

/// The subgroup lanes that can share x's reads ([`KernelKey::x_lanes`] above 1).
pub const X_LANES: [u32; 3] = [2, 4, 8];

macro_rules! kernel_file {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/shaders/kernels/",
            $name,
            ".wgsl"
        ))
    };
}

macro_rules! lib_file {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/shaders/lib/",
            $name,
            ".wgsl"
        ))
    };
}

/// The WGSL of `key`: the variant's constants (`B` columns, `T` invocations per row, `U` chunks
/// per loop step), the grids
/// binding where the format reads it, the format's decode module (with its output packer for
/// get_rows), `rows.wgsl`, the x reader of the matvec kernels and the kernel file, then for
/// the matvec kernels their row dot (`row_dot.wgsl` and `block_dot`, or on the integer path
/// `matvec_q8.wgsl` alone). Errors: a format without a shader.
pub fn kernel_source(key: &KernelKey) -> Result<String> {
    let packer = match (key.op, key.dtype) {
        (Op::GetRows, DType::F32) => lib_file!("out_f32"),
        (Op::GetRows, DType::F16) => concat!(lib_file!("out_f16"), lib_file!("store_pairs")),
        (Op::GetRows, DType::BF16) => concat!(lib_file!("out_bf16"), lib_file!("store_pairs")),
        _ => "",
    };
    let names = DecodeNames {
        prefix: "w_",
        blocks: "w",
        grids: "grids",
    };
    let module = decode_prefixed(key.format, packer, &names)?;
    let header = match key.op {
        Op::MatVec if key.rows > 0 => format!(
            "const B: u32 = {}u;\nconst WG: u32 = {}u;\nconst R: u32 = {}u;\nconst U: u32 = {}u;\n",
            key.columns, key.threads, key.rows, key.unroll
        ),
        Op::MatVec | Op::MatVecId => {
            format!(
                "const B: u32 = {}u;\nconst T: u32 = {}u;\nconst U: u32 = {}u;\n",
                key.columns, key.threads, key.unroll
            )
        }
        Op::GetRows | Op::MatMul => String::new(),
    };
    let grids = if key.format.binds_grids() {
        format!(
            "@group({}) @binding({}) var<storage, read> grids: array<u32>;\n",
            binding::STORAGE_GROUP,
            binding::GRIDS
        )
    } else {
        String::new()
    };
    let x8 = match (key.op, key.vec_x) {
        (Op::MatVec | Op::MatVecId, _) if key.x_lanes > 1 => x_shared(key),
        (Op::MatVec | Op::MatVecId, true) => kernel_file!("x_vec4").to_string(),
        (Op::MatVec | Op::MatVecId, false) => kernel_file!("x_scalar").to_string(),
        _ => String::new(),
    };
    let x8 = match key.op {
        Op::MatVec | Op::MatVecId => format!("{x8}\n{}", kernel_file!("x_tail")),
        Op::GetRows | Op::MatMul => x8,
    };
    // Shared x reads take their lane from lane_subgroup.wgsl's `Lane` (one invocation per row
    // never reduces).
    let reduce = match (key.op, key.uses_subgroups()) {
        (Op::MatVec, true) if key.rows > 0 => {
            concat!(
                kernel_file!("lane_subgroup"),
                kernel_file!("reduce_rows_subgroup")
            )
        }
        (Op::MatVec, false) if key.rows > 0 => {
            concat!(kernel_file!("lane_local"), kernel_file!("reduce_rows_tree"))
        }
        (Op::MatVec | Op::MatVecId, true) => {
            concat!(
                kernel_file!("lane_subgroup"),
                kernel_file!("reduce_subgroup")
            )
        }
        (Op::MatVec | Op::MatVecId, false) => {
            concat!(kernel_file!("lane_local"), kernel_file!("reduce_tree"))
        }
        _ => "",
    };
    // The matvec kernels' Params and bindings.
    let io = match key.op {
        Op::MatVec | Op::MatVecId => kernel_file!("matvec_io"),
        Op::GetRows | Op::MatMul => "",
    };
    if matches!(key.precision, Precision::Int8) {
        return Ok(format!(
            "{header}{grids}{module}\n{reduce}\n{io}\n{}\n{}",
            key.op.wgsl(),
            kernel_file!("matvec_q8")
        ));
    }
    // What a matvec chunk is and its dot with x, by precision.
    let chunks = match (key.op, key.precision) {
        (Op::MatVec | Op::MatVecId, Precision::Factored) => kernel_file!("chunk_factored"),
        (Op::MatVec | Op::MatVecId, _) => kernel_file!("chunk_exact"),
        (Op::GetRows | Op::MatMul, _) => "",
    };
    if key.rows > 0 {
        return Ok(format!(
            "{header}{grids}{module}\n{}\n{}\n{chunks}\n{io}\n{x8}\n{reduce}\n{}",
            one_value8(key),
            kernel_file!("rows"),
            kernel_file!("matvec_rows")
        ));
    }
    let block = match key.op {
        Op::MatVec | Op::MatVecId => format!("{}\n{}", kernel_file!("row_dot"), block_dot(key)),
        Op::GetRows | Op::MatMul => String::new(),
    };
    Ok(format!(
        "{header}{grids}{module}\n{}\n{}\n{chunks}\n{io}\n{x8}\n{reduce}\n{}\n{block}",
        one_value8(key),
        kernel_file!("rows"),
        key.op.wgsl()
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
    (Format::IQ4_NL, false),
    (Format::IQ4_XS, false),
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
/// the packing helpers of `shaders/lib/int8.wgsl`): x binding [`binding::X`], the codes and
/// scales binding [`binding::Y`], [`super::params::QuantizeParams`] in group 1.
pub fn quantize_source() -> String {
    format!("{}\n{}", lib_file!("int8"), kernel_file!("quantize_q8"))
}

/// `one_value8`, the reader of rows.wgsl's `chunk8` for a one-value format: the format's
/// `dequant8` at the chunk's byte, or with [`KernelKey::vec_w`] one vec4 load of the `wv`
/// binding through the format's `dequant8_words` (llvmpipe and SwiftShader pay per load, and a
/// u32 load there is a loop over the SIMD lanes).
fn one_value8(key: &KernelKey) -> String {
    if !key.vec_w {
        return "fn one_value8(byte: u32) -> array<vec4<u32>, 2> {\n    return w_dequant8(byte, 0u);\n}\n".into();
    }
    format!(
        "@group({}) @binding({}) var<storage, read> wv: array<vec4<u32>>;\n\n// The 8 values at byte `byte` (a multiple of 16) of the weight.\nfn one_value8(byte: u32) -> array<vec4<u32>, 2> {{\n    return w_dequant8_words(wv[byte / 16u]);\n}}\n",
        binding::STORAGE_GROUP,
        binding::WV
    )
}

/// x_shared.wgsl, its `x8` for `key.x_lanes` lanes (`subgroupBroadcast` takes a constant
/// lane, so the reader is written out here: lane `l` reads values `l, l + lanes, ...` of the
/// eight, and value `j` is lane `j % lanes`'s read `j / lanes`) and with vec4 x the `xv`
/// binding [`group_dot`] reads.
fn x_shared(key: &KernelKey) -> String {
    let lanes = key.x_lanes;
    let reads: String = (0..8 / lanes)
        .map(|i| format!("    let s{i} = x[o + {}u + x_lane];\n", i * lanes))
        .collect();
    let value = |j: u32| format!("subgroupBroadcast(s{}, {}u)", j / lanes, j % lanes);
    let half = |h: u32| {
        let v: Vec<String> = (4 * h..4 * h + 4).map(value).collect();
        format!("vec4<f32>({})", v.join(", "))
    };
    let xv = if key.vec_x {
        format!(
            "@group({}) @binding({}) var<storage, read> xv: array<vec4<f32>>;\n",
            binding::STORAGE_GROUP,
            binding::XV
        )
    } else {
        String::new()
    };
    format!(
        "const XL: u32 = {lanes}u;\n{}{xv}\n// x[o .. o + 8] as two vec4.\nfn x8(o: u32) -> array<vec4<f32>, 2> {{\n{reads}    return array<vec4<f32>, 2>({}, {});\n}}\n",
        kernel_file!("x_shared"),
        half(0),
        half(1)
    )
}

/// `group_dot` of the matvec kernels with x shared and read four values per load: parts 4g ..
/// 4g + 4 of a block (32 values) decoded, then for each column one vec4 of x per lane (8 lanes:
/// 32 values; 4 lanes, two) and each part's two vec4 broadcast from the lanes that read them.
/// The same sums as `part_dot`, added in the same order.
fn group_dot(lanes: u32) -> String {
    let decode: String = (0..4)
        .map(|p| format!("    let r{p} = w_dequant8(base, 4u * g + {p}u);\n"))
        .collect();
    let reads: String = (0..8 / lanes)
        .map(|m| format!("        let q{m} = xv[o + {}u];\n", m * lanes))
        .collect();
    let x = |i: u32| format!("subgroupBroadcast(q{}, {}u)", i / lanes, i % lanes);
    let adds: String = (0..4)
        .map(|p| {
            format!(
                "        (*acc)[b] += dot(bitcast<vec4<f32>>(r{p}[0]), {}) + dot(bitcast<vec4<f32>>(r{p}[1]), {});\n",
                x(2 * p),
                x(2 * p + 1)
            )
        })
        .collect();
    format!(
        "fn group_dot(acc: ptr<function, array<f32, B>>, base: u32, g: u32, at: u32, k: u32) {{\n{decode}    for (var b = 0u; b < B; b++) {{\n        let o = (at + 32u * g + b * k) / 4u + x_lane;\n{reads}{adds}    }}\n}}\n"
    )
}

/// `block_dot` of the matvec kernels: one block's dot products with the B columns of x, through
/// `part_dot` once per 8-value part (block formats only; one-value formats never call it). For
/// one column on one invocation per row (CPU adapters) every part is written out, so the
/// compiler sees the whole block at once and decodes what its parts share (scales, high bits)
/// once: 4096 x 1024 at n = 1 ran 1.0-2.2x faster (Q4_K 1.8x on lavapipe, 1.6x on llvmpipe GL,
/// 1.7x on SwiftShader). Otherwise four parts per loop step, which keeps the kernels of B
/// columns (each part's code repeated B times) quick to compile. (Q8_K's decoder selects
/// between its two products instead of branching: 32 copies of its branch, unrolled, made
/// SwiftShader 1.6x slower.) With shared vec4 x, the same through [`group_dot`], four parts
/// per call.
fn block_dot(key: &KernelKey) -> String {
    let parts = (key.format.block_elems() / 8).max(4);
    let unrolled = key.columns == 1 && key.threads == 1;
    if key.x_lanes > 1 && key.vec_x {
        let groups = parts / 4;
        let body: String = if unrolled {
            (0..groups)
                .map(|g| format!("    group_dot(acc, base, {g}u, at, k);\n"))
                .collect()
        } else {
            format!("    for (var g = 0u; g < {groups}u; g++) {{\n        group_dot(acc, base, g, at, k);\n    }}\n")
        };
        return format!(
            "fn block_dot(acc: ptr<function, array<f32, B>>, base: u32, at: u32, k: u32) {{\n{body}}}\n{}",
            group_dot(key.x_lanes)
        );
    }
    let body: String = if unrolled {
        (0..parts)
            .map(|p| format!("    part_dot(acc, base, {p}u, at, k);\n"))
            .collect()
    } else {
        let four: String = (0..4)
            .map(|i| format!("        part_dot(acc, base, p + {i}u, at, k);\n"))
            .collect();
        format!("    for (var p = 0u; p < {parts}u; p += 4u) {{\n{four}    }}\n")
    };
    format!("fn block_dot(acc: ptr<function, array<f32, B>>, base: u32, at: u32, k: u32) {{\n{body}}}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cover_every_variant_once() {
        let all = KernelKey::all();
        // Every thread count but 1 also has the subgroup reduction, and both unrolled; 1 has
        // shared x.
        let reductions = 2 * MATVEC_THREADS.len() - 1;
        let matvecs = (reductions + 2 * (MATVEC_THREADS.len() - 1) + X_LANES.len()) * 2;
        // The rows mapping: (columns, rows) with rows × columns <= 16, both reductions, and
        // below 4 rows also unrolled; every workgroup size, both x readers.
        let rows_variants: usize = (1..=MATVEC_MAX_BATCH)
            .flat_map(|c| ROWS_PER_GROUP.map(move |r| (c, r)))
            .filter(|&(c, r)| c * r <= ROWS_MAX_SUMS)
            .map(|(_, r)| if r < 4 { 4 } else { 2 })
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
            DType::ALL.len() + 1 + readers * (9 * matvecs + matvecs + rows_variants)
        };
        // The integer path: every columns × threads, and the subgroup reduction for threads > 1;
        // the factored sums: every matvec but shared x, on both mappings.
        let factored = (1 + 4 * (MATVEC_THREADS.len() - 1)) * 2;
        let int = 9 * reductions + 9 * factored + rows_variants;
        let want: usize = crate::formats::WITH_SHADER
            .iter()
            .map(per_format)
            .sum::<usize>()
            + INT_DOT_FORMATS.len() * int;
        assert_eq!(all.len(), want);
        assert!(all
            .iter()
            .any(|k| k.vec_w && k.op == Op::MatVecId && k.x_lanes == 8));
        let unique: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len());
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
        assert!(key.precision == Precision::Int8 && !key.vec_x);
        assert_eq!(
            key.bindings().collect::<Vec<_>>(),
            [binding::W, binding::X, binding::Y]
        );
        let s = kernel_source(&key).unwrap();
        assert!(s.contains("dot4I8Packed(q.x, x0)") && s.contains("fn w_qpart8("));
        assert_eq!(
            KernelKey::matvec(Format::IQ2_XXS, 1, 1, false)
                .with_precision(Precision::Int8)
                .precision,
            Precision::Exact
        );
        assert_eq!(
            KernelKey::matvec_id(Format::Q4_K, 1, false)
                .with_precision(Precision::Int8)
                .precision,
            Precision::Exact
        );
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
            assert_eq!(key.precision, f);
            let s = kernel_source(&key).unwrap();
            assert!(s.contains("alias Chunk = vec4<u32>;") && s.contains("fn w_qpart8("));
            assert!(!s.contains("alias Chunk = array<vec4<f32>, 2>;"));
        }
        // x is not shared by lanes in factored sums; formats without parts stay exact.
        let one = KernelKey::matvec(Format::Q4_0, 1, 1, true).with_precision(f);
        assert_eq!(one.with_x_lanes(4), one);
        assert_eq!(
            KernelKey::matvec(Format::IQ2_XXS, 1, 8, true)
                .with_precision(f)
                .precision,
            Precision::Exact
        );
        let s = kernel_source(&KernelKey::matvec_id(Format::Q4_K, 4, false)).unwrap();
        assert!(s.contains("alias Chunk = array<vec4<f32>, 2>;"));
    }

    #[test]
    fn bindings_follow_the_variant() {
        let b = |k: KernelKey| k.bindings().collect::<Vec<_>>();
        use binding::*;
        assert_eq!(b(KernelKey::matvec(Format::Q4_0, 1, 1, false)), [W, X, Y]);
        assert_eq!(
            b(KernelKey::matvec(Format::IQ2_XXS, 1, 1, true)),
            [W, X, Y, GRIDS, XV]
        );
        assert_eq!(
            b(KernelKey::get_rows(Format::Q4_K, DType::F16)),
            [W, Y, IDS]
        );
        assert_eq!(
            b(KernelKey::matvec_id(Format::IQ1_S, 64, false)),
            [W, X, Y, IDS, GRIDS]
        );
        assert_eq!(
            b(KernelKey::matvec(Format::BF16, 2, 1, true).with_vec_w(true)),
            [W, X, Y, XV, WV]
        );
        // Only F16 and BF16 have the four-word reader.
        assert!(
            !KernelKey::matvec(Format::F32, 1, 1, true)
                .with_vec_w(true)
                .vec_w
        );
        assert!(!KernelKey::matmul(Format::F16).with_vec_w(true).vec_w);
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
        assert!(
            !KernelKey::matvec(Format::Q4_0, 3, 1, true)
                .with_subgroups(true)
                .subgroups
        );
        assert!(
            !KernelKey::matmul(Format::Q4_0)
                .with_subgroups(true)
                .subgroups
        );
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
        assert!(key.x_lanes == 4 && key.uses_subgroups() && !key.subgroups);
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
        assert_eq!(KernelKey::matmul(Format::Q4_K).with_x_lanes(8).x_lanes, 1);
        assert_eq!(
            KernelKey::matvec_id(Format::Q4_K, 1, false)
                .with_x_lanes(1)
                .x_lanes,
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

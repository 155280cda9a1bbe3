//! Inference kernels on raw resident blocks: row gather (`get_rows`), matrix-vector products for
//! 1 to 8 columns (`matvec`), tiled matrix-matrix products for any number of columns (`matmul`)
//! and ggml's expert-indexed `MUL_MAT_ID` (`matvec_id`), for every format with a shader, on
//! adapters without `shader-f16` or subgroups.
//!
//! Orientation as in ggml: a weight with dims `[K, N]` is `N` rows of `K` values; `y = W x` is
//! `y[n] = Σ_k W[n, k] x[k]`. Inputs are f32, row-major `[batch, K]`; outputs `[batch, N]` f32
//! (`get_rows`: `[ids, K]` in f32, f16 or bf16). Each kernel decodes the weight with the format's
//! own `dequant8` ([`super::decode`]), so every weight value is bit-exact with the CPU codec, and
//! sums in f32.
//!
//! **Accuracy contract:** per output element, `|y − y_ref| ≤ K · 2⁻²³ · Σ_k |W[n,k] x[k]| + K · 2⁻¹²⁵`
//! against the f64 reference of [`crate::ops`] (the worst case of f32 summation in any order, and
//! subnormal results flushed to zero, which WGSL allows; see [`crate::ops::Sums::bound`]).
//! NaN and infinity propagate; results repeat bit for bit from run to run on one adapter.
//!
//! # The registry
//!
//! One line per kernel in `for_each_kernel!`: its [`Op`], name, WGSL file, [`params`] struct,
//! family (whose file numbers its bindings), the inputs it takes ([`Inputs`]) and a summary.
//! [`Op`], its names (the command line's `apply --op`, `verify --op` and `bench --kernels`
//! values) and the bench's rows are expanded from it; adding a weight kernel is one line there, one file in `shaders/kernels/`,
//! its recording in `record.rs` and its CPU reference in [`crate::ops`].
//!
//! # The ABI, checked without a GPU
//!
//! * [`params`]: each kernel's uniform `Params` as a `#[repr(C)]` bytemuck struct.
//! * [`binding`]: the groups every kernel shader and bind-group layout use: the storage
//!   buffers in group 0, numbered by each family ([`StorageBinding`], [`Buf`]: `BINDINGS` in
//!   the family's file), the `Params` uniform in group 1 (bound with a dynamic offset into the
//!   recording's one uniform buffer).
//! * [`KernelKey`] and [`kernel_source`]: the composed WGSL of every variant the engine can
//!   compile (format, columns, threads per row, vec4 x, output dtype); [`KernelKey::all`] lists
//!   them.
//!
//! `tests/cpu/kernel_abi.rs` reads every kernel's WGSL through naga and checks its `Params`,
//! bindings, workgroup size and shared constants against this module;
//! `tests/cpu/kernel_shaders.rs` validates every variant under `Capabilities::empty()` and
//! translates it to SPIR-V, MSL, HLSL and GLSL. Both build without wgpu.
//!
//! # Recording (feature `gpu`)
//!
//! A [`Recorder`] records kernels into a caller's compute pass and is kept from step to step:
//! the parameters of a recording are packed into one uniform buffer (dynamic offsets), bind
//! groups are cached per tensor part and operand buffer, layouts and pipelines are made once,
//! so a warm step creates no wgpu object ([`RecorderStats`]). Engines' own kernels (a norm, a
//! softmax) go through the same recorder ([`Program`], [`Recorder::dispatch`]). The one-line
//! calls (`GpuEngine::matvec`, `matmul`, `get_rows`, `matvec_id`) and the `GpuEngine::record_*`
//! methods are thin wrappers over a recorder of their own.
//!
//! Every kernel works on [`ResidentTensor`](super::loader::ResidentTensor)s, also split ones or
//! ones larger than a storage binding (each dispatch binds one run of whole rows). A tensor the
//! loader made resident dequantised (f32, f16, bf16) is multiplied as a weight of that format.
//! Dims past the second are folded into rows (a `[K, N, E]` weight is `N · E` rows of `K`;
//! ggml's `MUL_MAT` would instead broadcast E separate products), except in `matvec_id`, which
//! reads them as experts.
//!
//! Out-of-range row and expert ids: the one-line calls refuse them with an error naming the id
//! and its position; the recorded kernels, whose ids live in a GPU buffer, write NaN for them.

use std::fmt;

/// A file of `shaders/kernels/`, compiled in.
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

/// A file of `shaders/lib/`, compiled in.
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

#[cfg(feature = "gpu")]
mod api;
mod compose;
#[cfg(feature = "gpu")]
mod dispatch;
pub mod family;
#[cfg(feature = "gpu")]
mod layout;
pub mod params;
mod plan;
mod precision;
#[cfg(feature = "gpu")]
mod record;
#[cfg(feature = "gpu")]
mod tuner;

#[cfg(feature = "gpu")]
pub use api::{GetRowsJob, Job, MatVecIdJob, MulMatJob, Operand};
pub use compose::{
    int_dot_min, kernel_source, quantize_source, KernelKey, Variant, INT_DOT_FORMATS,
};
pub use family::get_rows::{
    plan_get_rows, GetRows, GetRowsCall, GetRowsDispatch, GetRowsPlan, GetRowsWindow,
};
pub use family::matmul::MatMul;
pub use family::matvec::{
    plan_mul, reads_f16, ColumnGroup, Mapping, MatVec, MatVecOptions, MatVecPolicy, MulCall,
    MulDispatch, MulOp, MulParams, MulPlan, QuantizePlan, RowsShape, MATVEC_THREADS,
    ROWS_MAX_SLOT_CHUNKS, ROWS_MAX_SUMS, ROWS_PER_GROUP, ROWS_SLOTS, ROWS_WORKGROUPS, X_LANES,
};
pub use family::matvec_id::{plan_matvec_id, MatVecIdCall, MatVecIdPlan, MatVecIdWindow};
#[cfg(feature = "gpu")]
pub(crate) use layout::KernelSet;
#[cfg(feature = "gpu")]
pub use layout::{BindingKind, Program};
pub use plan::{
    row_runs, Extent, MappingKey, PartBinding, PartLayout, Plan, RowRun, Shape, Span, WeightLayout,
};
pub use precision::Precision;
#[cfg(feature = "gpu")]
pub use record::{Recorder, RecorderStats, RETAIN_RECORDINGS};
#[cfg(feature = "gpu")]
pub use tuner::{TuneReport, TuneRow, TuneSettings, TuneSource, TUNE_SHAPES};

/// Columns one `matvec` dispatch takes at most.
pub const MATVEC_MAX_BATCH: u32 = 8;
/// Columns one matvec dispatch of `GpuEngine::record_matmul` takes on CPU adapters.
pub const MATMUL_CPU_COLUMNS: u32 = 16;
/// Rows and columns of one `matmul` workgroup's output tile (`TN`, `TB` in `matmul.wgsl`).
pub const MATMUL_TILE: u32 = 32;
/// Invocations per workgroup of every kernel but the matvec rows mapping (`WG` in `matvec.wgsl`,
/// the `@workgroup_size` of the others; [`KernelKey::workgroup_size`]).
pub const WORKGROUP_SIZE: u32 = 64;
/// Output values each `get_rows` invocation writes (`VALUES` in `get_rows.wgsl`).
pub const GET_ROWS_VALUES: u32 = 8;

/// The bind groups of the kernel shaders and their layouts. The storage bindings' numbers are
/// each family's own ([`StorageBinding`]: `BINDINGS` in the family's file).
pub mod binding {
    /// Group of the storage buffers.
    pub const STORAGE_GROUP: u32 = 0;
    /// Group of the `Params` uniform.
    pub const PARAMS_GROUP: u32 = 1;
    /// `params: Params` in [`PARAMS_GROUP`], bound with a dynamic offset.
    pub const PARAMS: u32 = 0;
}

/// What a kernel's group-0 storage binding holds; the recorder binds each by what it holds,
/// and each family numbers its own ([`StorageBinding`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buf {
    /// `w: array<u32>`: the weight's raw blocks (one run of whole rows).
    W,
    /// `wv: array<vec4<u32>>`: the weight binding again, read four words per load (F16 and
    /// BF16 rows of whole 16-byte chunks: [`MatVec::vec_w`]).
    WV,
    /// `x`: the input columns (f32, or the integer path's codes and scales).
    X,
    /// `xv: array<vec4<f32>>`: the x binding again, read four values per load (vec4 variants).
    XV,
    /// The output (read-write): `y: array<f32>`, get_rows' `dst: array<vec4<u32>>`.
    Y,
    /// `ids: array<u32>`: row or expert ids.
    Ids,
    /// `grids: array<u32>`: the i-quant grids of [`crate::gpu::tables`] (formats that read them).
    Grids,
}

/// How a kernel declares one of its group-0 storage bindings: a row of its family's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StorageBinding {
    /// What it holds.
    pub buf: Buf,
    /// The binding number, in the family's own numbering.
    pub binding: u32,
    /// `read_write` (the output) rather than `read`.
    pub read_write: bool,
    /// Bytes of one array element: 4 (`u32`, `f32`) or 16 (`vec4`).
    pub element_bytes: u64,
}

impl StorageBinding {
    /// A read-only binding of `buf` at `binding`, `element_bytes` per element.
    pub const fn read(buf: Buf, binding: u32, element_bytes: u64) -> StorageBinding {
        StorageBinding {
            buf,
            binding,
            read_write: false,
            element_bytes,
        }
    }

    /// The read-write output at `binding`, `element_bytes` per element.
    pub const fn out(binding: u32, element_bytes: u64) -> StorageBinding {
        StorageBinding {
            buf: Buf::Y,
            binding,
            read_write: true,
            element_bytes,
        }
    }

    /// The number of `buf` in `table`, where it has one.
    pub const fn number(table: &[StorageBinding], buf: Buf) -> Option<u32> {
        let mut i = 0;
        while i < table.len() {
            if table[i].buf as u8 == buf as u8 {
                return Some(table[i].binding);
            }
            i += 1;
        }
        None
    }
}

/// The inputs a kernel takes besides its weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inputs {
    /// `batch × K` f32 columns.
    X,
    /// u32 row ids.
    Ids,
    /// `tokens × K` (or `tokens × slots × K`) f32 values and `tokens × slots` expert ids.
    XIds,
}

/// One call's inputs besides the weight, on the host: what the one-line calls
/// (`GpuEngine::run`) and the CPU reference ([`crate::ops::reference`]) take for any [`Op`].
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// `batch × K` f32 values, row-major ([`Inputs::X`]).
    X {
        /// The values.
        x: &'a [f32],
        /// Columns.
        batch: usize,
    },
    /// Row ids ([`Inputs::Ids`]).
    Ids(&'a [u32]),
    /// Expert ids and their inputs ([`Inputs::XIds`]): `ids` is `tokens × slots`, `x` is
    /// `tokens × K`, or `tokens × slots × K` when `x_per_slot`.
    XIds {
        /// The values.
        x: &'a [f32],
        /// The expert ids.
        ids: &'a [u32],
        /// Experts per token.
        slots: usize,
        /// One row of x per (token, slot) rather than per token.
        x_per_slot: bool,
    },
}

impl Input<'_> {
    /// Its kind.
    pub const fn kind(&self) -> Inputs {
        match self {
            Input::X { .. } => Inputs::X,
            Input::Ids(_) => Inputs::Ids,
            Input::XIds { .. } => Inputs::XIds,
        }
    }
}

/// The registry of kernels: one line each, `(Op variant, name, WGSL file stem under
/// `shaders/kernels/`, params struct, family (whose `BINDINGS` are its group-0 bindings), inputs,
/// summary)`. The entry point is
/// the name. Every item that lists kernels is expanded from here.
macro_rules! for_each_kernel {
    ($m:ident) => {
        $m! {
            (GetRows, "get_rows", get_rows, GetRowsParams, get_rows, Ids,
             "rows of the weight by id (the embedding lookup), bit-exact, as f32, f16 or bf16"),
            (MatVec, "matvec", matvec, MatVecParams, matvec, X,
             "Y = W X for 1 to 8 columns per dispatch (token generation)"),
            (MatMul, "matmul", matmul, MatMulParams, matmul, X,
             "Y = W X for any number of columns, tiled (prompt batches)"),
            (MatVecId, "matvec_id", matvec, MatVecParams, matvec_id, XIds,
             "ggml's MUL_MAT_ID: per token and slot, the rows of the expert its id names"),
        }
    };
}

macro_rules! ops {
    ($(($op:ident, $name:literal, $file:ident, $params:ident, $family:ident, $inputs:ident, $summary:literal)),* $(,)?) => {
        /// A kernel of the registry (`for_each_kernel!`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Op {
            $(#[doc = $summary] $op,)*
        }

        impl Op {
            /// Every kernel, in registry order.
            pub const ALL: &'static [Op] = &[$(Op::$op),*];

            /// The kernel's name: its entry point, and its value on the command line.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Op::$op => $name,)*
                }
            }

            /// One line on what it computes.
            pub const fn summary(self) -> &'static str {
                match self {
                    $(Op::$op => $summary,)*
                }
            }

            /// The inputs it takes besides the weight.
            pub const fn inputs(self) -> Inputs {
                match self {
                    $(Op::$op => Inputs::$inputs,)*
                }
            }

            /// Its group-0 storage bindings, its family's table (`BINDINGS` in
            /// [`family`]): every binding one of its variants may declare, in binding order.
            pub const fn bindings(self) -> &'static [StorageBinding] {
                match self {
                    $(Op::$op => family::$family::BINDINGS,)*
                }
            }

            /// Its WGSL (`shaders/kernels/<file>.wgsl`), before composition.
            pub const fn wgsl(self) -> &'static str {
                match self {
                    $(Op::$op => include_str!(concat!(
                        env!("CARGO_MANIFEST_DIR"), "/shaders/kernels/", stringify!($file), ".wgsl"
                    )),)*
                }
            }

            /// The name of its WGSL file, `shaders/kernels/<stem>.wgsl`.
            pub const fn wgsl_file(self) -> &'static str {
                match self {
                    $(Op::$op => concat!("shaders/kernels/", stringify!($file), ".wgsl"),)*
                }
            }

            /// Its params struct's members (name, byte offset, scalar type) and size.
            pub fn params_layout(self) -> (&'static [params::ParamField], usize) {
                use params::KernelParams;
                match self {
                    $(Op::$op => (params::$params::FIELDS, std::mem::size_of::<params::$params>()),)*
                }
            }
        }
    };
}
for_each_kernel!(ops);

impl Op {
    /// The kernel named `name` (ASCII case ignored; `-` for `_`).
    pub fn from_name(name: &str) -> Option<Op> {
        let name = name.trim().to_ascii_lowercase().replace('-', "_");
        Op::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Whether its speed is bound by the bytes it reads (the products of one or a few columns,
    /// the gather) rather than by arithmetic (the tiled matmul).
    pub const fn bandwidth_bound(self) -> bool {
        !matches!(self, Op::MatMul)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_entry_points() {
        for &op in Op::ALL {
            assert_eq!(Op::from_name(op.name()), Some(op));
            assert_eq!(Op::from_name(&op.name().to_uppercase()), Some(op));
            assert!(op.wgsl().contains(&format!("fn {}(", op.name())), "{op}");
        }
        assert_eq!(Op::from_name("get-rows"), Some(Op::GetRows));
        assert_eq!(Op::from_name("gemm"), None);
        assert_eq!(
            Op::ALL.iter().map(|o| o.name()).collect::<Vec<_>>(),
            ["get_rows", "matvec", "matmul", "matvec_id"]
        );
    }
}

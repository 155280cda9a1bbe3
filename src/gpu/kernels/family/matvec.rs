//! The matvec family: `Y = W X` for 1 to [`MATVEC_MAX_BATCH`] columns (token generation), on
//! two mappings: the classic one (`shaders/kernels/matvec.wgsl`: 64 invocations per workgroup,
//! [`MATVEC_THREADS`] per row) and the rows mapping for GPUs (`matvec_rows.wgsl`: a workgroup of
//! [`ROWS_WORKGROUPS`] invocations on [`ROWS_PER_GROUP`] rows), each in the precision modes a
//! format has. Its variant types and rules, its WGSL composition, the policy that picks a
//! mapping and precision per call ([`Plan::matvec_choice`]) and the plan of every product's
//! dispatches ([`plan_mul`], matmul's included: on CPU adapters matmul runs as matvecs).

use super::super::compose;
use super::super::params::{MatMulParams, MatVecParams};
use super::super::plan::{
    aligned_rows, invalid, row_runs, span_of, Extent, MappingKey, Plan, RowRun, Shape, Span,
    WeightLayout,
};
use super::super::{
    binding, int_dot_min, Buf, KernelKey, Op, Precision, StorageBinding, Variant,
    MATMUL_CPU_COLUMNS, MATMUL_TILE, MATVEC_MAX_BATCH, WORKGROUP_SIZE,
};
use super::matmul;
use crate::gpu::decode::{uses_lookup, Swaps};
use crate::gpu::{windows, GpuError};
use crate::{Format, Result};

/// matvec's group-0 bindings (`shaders/kernels/matvec_io.wgsl` and the pieces composed with
/// it): the weight, x (f32, or the integer path's codes), y, the grids (formats that read
/// them), x as vec4 ([`MatVec::vec_x`]) and the weight as vec4 ([`MatVec::vec_w`]).
pub const BINDINGS: &[StorageBinding] = &[
    StorageBinding::read(Buf::W, 0, 4),
    StorageBinding::read(Buf::X, 1, 4),
    StorageBinding::out(2, 4),
    StorageBinding::read(Buf::Grids, 4, 4),
    StorageBinding::read(Buf::XV, 5, 16),
    StorageBinding::read(Buf::WV, 6, 16),
];

/// The integer path's x quantiser's group-0 bindings (`shaders/kernels/quantize_q8.wgsl`): x,
/// and the codes, scales and sums it writes.
pub const QUANTIZE_BINDINGS: &[StorageBinding] = &[
    StorageBinding::read(Buf::X, 1, 4),
    StorageBinding::out(2, 4),
];

/// The number matvec's kernels bind `buf` at.
const fn number(buf: Buf) -> u32 {
    match StorageBinding::number(BINDINGS, buf) {
        Some(b) => b,
        None => panic!("matvec binds it"),
    }
}

/// The invocations per matvec row the engine can use ([`MatVecOptions::threads`]):
/// the powers of two up to the workgroup.
pub const MATVEC_THREADS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Chunks per loop step of an unrolled matvec row ([`MatVec::unroll`]).
pub const MATVEC_UNROLL: u32 = 4;

/// The invocations per workgroup of the matvec rows mapping ([`MatVec::rows`]).
pub const ROWS_WORKGROUPS: [u32; 4] = [32, 64, 128, 256];

/// The rows per workgroup of the matvec rows mapping ([`MatVec::rows`]).
pub const ROWS_PER_GROUP: [u32; 4] = [1, 2, 4, 8];

/// The chunks per slot of the matvec rows mapping ([`MatVec::slot`]).
pub const ROWS_SLOTS: [u32; 3] = [1, 2, 4];

/// The most chunks of one slot step: rows × slot ([`MatVec::slot`]; the chunks an invocation
/// holds decoded at once).
pub const ROWS_MAX_SLOT_CHUNKS: u32 = 8;

/// The most sums one invocation of the rows mapping holds: rows × columns
/// ([`MatVec::rows`]; its workgroup-memory reduction keeps them all for every invocation,
/// 16 KiB at 256 invocations).
pub const ROWS_MAX_SUMS: u32 = 16;

/// The shape of the matvec rows mapping ([`MatVec::rows`]): invocations per workgroup and
/// rows per workgroup, written `WxR` (e.g. `128x2`: 128 invocations on 2 rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowsShape {
    /// Invocations per workgroup, one of [`ROWS_WORKGROUPS`].
    pub workgroup: u32,
    /// Rows per workgroup, one of [`ROWS_PER_GROUP`]; fewer where the columns would make rows
    /// × columns exceed [`ROWS_MAX_SUMS`] ([`RowsShape::rows_for`]).
    pub rows: u32,
    /// Consecutive chunks per invocation, one of [`ROWS_SLOTS`] ([`MatVec::slot`]; 1 by
    /// default), rows × slot at most [`ROWS_MAX_SLOT_CHUNKS`].
    pub slot: u32,
}

impl RowsShape {
    /// The shape `workgroup` × `rows`, where both are variants.
    pub fn new(workgroup: u32, rows: u32) -> Option<RowsShape> {
        (ROWS_WORKGROUPS.contains(&workgroup) && ROWS_PER_GROUP.contains(&rows)).then_some(
            RowsShape {
                workgroup,
                rows,
                slot: 1,
            },
        )
    }

    /// This shape with `slot` consecutive chunks per invocation, where that is a variant (one
    /// of [`ROWS_SLOTS`], rows × slot at most [`ROWS_MAX_SLOT_CHUNKS`]).
    pub fn with_slot(self, slot: u32) -> Option<RowsShape> {
        (ROWS_SLOTS.contains(&slot) && self.rows * slot <= ROWS_MAX_SLOT_CHUNKS)
            .then_some(RowsShape { slot, ..self })
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
        write!(f, "{}x{}", self.workgroup, self.rows)?;
        if self.slot > 1 {
            write!(f, "s{}", self.slot)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for RowsShape {
    type Err = String;

    /// `WxR` or `WxRsS`, e.g. `128x2` or `64x2s4`.
    fn from_str(s: &str) -> std::result::Result<RowsShape, String> {
        let bad = || {
            format!(
                "matvec rows shape '{s}': expected WxR or WxRsS with W one of {ROWS_WORKGROUPS:?}, R one of {ROWS_PER_GROUP:?} and S one of {ROWS_SLOTS:?} (R × S at most {ROWS_MAX_SLOT_CHUNKS}), e.g. 128x2 or 64x2s4"
            )
        };
        let (w, rest) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
        let (r, slot) = rest.split_once(['s', 'S']).unwrap_or((rest, "1"));
        let number = |t: &str| t.parse::<u32>().map_err(|_| bad());
        RowsShape::new(number(w)?, number(r)?)
            .and_then(|shape| shape.with_slot(number(slot).ok()?))
            .ok_or_else(bad)
    }
}

/// How matvec maps rows to invocations: what the kernel policy chooses per call (the engine's
/// default, or the tuner's choice for the call's format, K, N and columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mapping {
    /// `matvec.wgsl`: 64 invocations per workgroup, the engine's threads per row.
    Classic,
    /// `matvec_rows.wgsl` in this shape ([`MatVec::rows`]).
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

    /// `classic` or `rows:WxR[sS]` (also `rows WxR`, or `WxR` alone).
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
            .map_err(|e| format!("matvec variant '{s}': expected classic or rows:WxR[sS]; {e}"))
    }
}

/// What an engine's matvec calls are asked to run on ([`crate::gpu::EngineOptions::matvec`]);
/// [`MatVecPolicy::new`] turns it into the engine's policy on one device. A new matvec knob is
/// a field here, its rule in [`MatVecPolicy`] and its field of [`MatVec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatVecOptions {
    /// The mapping of calls the tuner made no choice for (default [`Mapping::Classic`];
    /// `--variant`). The rows mapping's sums are other than the classic mapping's, within the
    /// same bound. matvec_id keeps the classic mapping.
    pub mapping: Mapping,
    /// Invocations per row on the classic mapping, one of [`MATVEC_THREADS`]; `None` (the
    /// default) picks by adapter ([`MatVecPolicy::threads`]).
    pub threads: Option<u32>,
    /// Let the kernels use subgroup operations where the device can (default `true`): the
    /// subgroup reductions and x's reads shared by lanes ([`MatVec::subgroups`],
    /// [`MatVec::x_lanes`]). `false`: workgroup memory, and every invocation reads x itself. The
    /// same sums, bit for bit.
    pub subgroups: bool,
    /// Unroll rows of several invocations where a kernel can (default `true`;
    /// [`MatVec::unroll`]): the same sums, bit for bit. `bench --no-unroll` sets it to compare.
    pub unroll: bool,
    /// Where the kernels convert binary16 with the device's own instruction
    /// ([`MatVec::hw_f16`]), on a device where the engine found it exact: `None` (the default)
    /// F16 weights everywhere and the block formats' f16 scales too on GPUs (CPU adapters convert
    /// a block's scales as fast with integer operations: lavapipe 0.82–1.27× over four pairs,
    /// F16 1.00–1.24×); `Some(true)` every format; `Some(false)` none. The same weight values,
    /// so the same sums, bit for bit.
    pub hw_f16: Option<bool>,
}

impl Default for MatVecOptions {
    fn default() -> MatVecOptions {
        MatVecOptions {
            mapping: Mapping::Classic,
            threads: None,
            subgroups: true,
            unroll: true,
            hw_f16: None,
        }
    }
}

/// The choices an engine's matvec and matvec_id kernels are made with on one device: its
/// [`MatVecOptions`] and what the device offers. [`Plan::matvec_key`] applies it to a call;
/// a pure value, so the CPU-only tests plan with any policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatVecPolicy {
    /// The mapping of calls the tuner made no choice for ([`MatVecOptions::mapping`]).
    pub mapping: Mapping,
    /// Invocations per row on the classic mapping: [`MatVecOptions::threads`], else 1 on CPU
    /// adapters (llvmpipe, SwiftShader), where every barrier costs; on other adapters with
    /// subgroups the smallest subgroup (at least 8, at most 64), and 64 elsewhere.
    pub threads: u32,
    /// The subgroup sizes (smallest, largest; the smallest a power of two) the kernels may use:
    /// the device's where it has wgpu's `SUBGROUP` feature and [`MatVecOptions::subgroups`]
    /// allows them, else `None`.
    pub subgroups: Option<(u32, u32)>,
    /// Whether rows of several invocations are unrolled where a kernel can
    /// ([`MatVecOptions::unroll`], [`KernelKey::with_unroll`]).
    pub unroll: bool,
    /// Whether the kernels convert F16 weights with the device's `unpack2x16float`
    /// ([`MatVecOptions::hw_f16`] on a device where it gives every f16 its exact value,
    /// [`KernelKey::with_hw_f16`]).
    pub hw_f16: bool,
    /// Whether they convert the other formats' f16 scales with it too (on GPUs, by default).
    pub hw_f16_scales: bool,
}

impl MatVecPolicy {
    /// The policy of `options` on a device that is a CPU adapter or not, has subgroups of
    /// `subgroups` sizes (smallest, largest) or none, takes at most `max_workgroup`
    /// invocations per workgroup, and converts every binary16 exactly with `unpack2x16float`
    /// or not (`exact_f16`, as the engine probes it). Errors: threads per row or a rows shape the
    /// options name that are no variant or too large for the device, as one line.
    pub fn new(
        options: &MatVecOptions,
        cpu: bool,
        subgroups: Option<(u32, u32)>,
        max_workgroup: u32,
        exact_f16: bool,
    ) -> std::result::Result<MatVecPolicy, String> {
        let device = subgroups.filter(|(min, max)| min.is_power_of_two() && min <= max);
        let threads = match options.threads {
            Some(t) if MATVEC_THREADS.contains(&t) && t <= max_workgroup => t,
            Some(t) => {
                return Err(format!(
                    "matvec threads per row {t}: expected one of {MATVEC_THREADS:?}, at most the device's {max_workgroup} invocations per workgroup"
                ))
            }
            None if cpu => 1,
            None => device.map_or(WORKGROUP_SIZE, |(min, _)| min.clamp(8, 64)),
        };
        if let Mapping::Rows(shape) = options.mapping {
            if RowsShape::new(shape.workgroup, shape.rows).and_then(|s| s.with_slot(shape.slot))
                != Some(shape)
                || shape.workgroup > max_workgroup
            {
                return Err(format!(
                    "matvec variant rows:{shape}: expected W one of {ROWS_WORKGROUPS:?} (at most the device's {max_workgroup} invocations per workgroup) and R one of {ROWS_PER_GROUP:?}"
                ));
            }
        }
        Ok(MatVecPolicy {
            mapping: options.mapping,
            threads,
            subgroups: device.filter(|_| options.subgroups),
            unroll: options.unroll,
            hw_f16: exact_f16 && options.hw_f16 != Some(false),
            hw_f16_scales: exact_f16 && options.hw_f16.unwrap_or(!cpu),
        })
    }

    /// Whether the classic mapping's rows reduce through subgroup shuffles: more than one but at
    /// most the smallest subgroup of invocations per row ([`MatVec::subgroups`]).
    pub fn classic_subgroups(&self) -> bool {
        self.subgroups
            .is_some_and(|(min, _)| self.threads > 1 && self.threads <= min)
    }

    /// With one invocation per row, the lanes that share each read of x: the smallest subgroup,
    /// at most 8 ([`MatVec::x_lanes`]); else 1. On llvmpipe, which loads storage lane by lane,
    /// x's loads had been most of the kernel's time (n = 8, Q4_0: 85 %).
    pub fn x_lanes(&self) -> u32 {
        match self.subgroups {
            Some((min, _)) if self.threads == 1 => min.min(8),
            _ => 1,
        }
    }

    /// Whether the rows mapping in `shape` reduces through subgroup shuffles: every subgroup
    /// full (at most W lanes) and at least 4 lanes (its workgroup memory has a slot per 4
    /// invocations).
    pub fn rows_subgroups(&self, shape: RowsShape) -> bool {
        self.subgroups
            .is_some_and(|(min, max)| min >= 4 && max <= shape.workgroup)
    }

    /// Whether the kernels of `format` convert binary16 by the device ([`MatVecPolicy::hw_f16`]
    /// for F16, [`MatVecPolicy::hw_f16_scales`] for the others).
    pub fn hw_f16_for(&self, format: Format) -> bool {
        if format == Format::F16 {
            self.hw_f16
        } else {
            self.hw_f16_scales
        }
    }

    /// Whether the default mapping's rows are unrolled: [`MatVecPolicy::unroll`] and several
    /// invocations per row.
    pub fn unrolled(&self) -> bool {
        self.unroll && (self.threads > 1 || matches!(self.mapping, Mapping::Rows(_)))
    }

    /// The matvec_id kernel of `format` (the classic mapping at one column, `exact`) with this
    /// policy's reductions, shared x and unrolling.
    pub fn matvec_id_key(&self, format: Format, vec_x: bool, vec_w: bool) -> KernelKey {
        KernelKey::matvec_id(format, self.threads, vec_x)
            .with_vec_w(vec_w)
            .with_subgroups(self.classic_subgroups())
            .with_x_lanes(self.x_lanes())
            .with_unroll(self.unroll)
            .with_hw_f16(self.hw_f16_for(format))
    }
}

/// The subgroup lanes that can share x's reads ([`MatVec::x_lanes`] above 1).
pub const X_LANES: [u32; 3] = [2, 4, 8];

/// A matvec kernel's variant (and matvec_id's: the classic mapping at one column, `exact`).
/// Fields a variant does not use hold their defaults (threads 1, rows 0, x_lanes and unroll 1,
/// `exact`), so equal kernels have equal variants; build them with [`KernelKey::matvec`],
/// [`KernelKey::matvec_rows`], [`KernelKey::matvec_id`] and the `with_*` rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatVec {
    /// Columns per dispatch (1 to [`MATVEC_MAX_BATCH`], or [`MATMUL_CPU_COLUMNS`]; matvec_id: 1).
    pub columns: u32,
    /// Invocations per row (one of [`MATVEC_THREADS`]; with [`MatVec::rows`], the workgroup's
    /// invocations, one of [`ROWS_WORKGROUPS`]).
    pub threads: u32,
    /// 0 for the classic mapping (`matvec.wgsl`: 64 invocations per workgroup, `threads` per
    /// row, each row its own invocations), or the rows mapping for GPUs (`matvec_rows.wgsl`, as
    /// llama.cpp's `mul_mat_vec`): all `threads` invocations of a workgroup work on this many
    /// rows (one of [`ROWS_PER_GROUP`], rows × columns at most [`ROWS_MAX_SUMS`]), each chunk
    /// of x read once for them all. Other sums than the classic mapping's (another order),
    /// within the same f32 bound; a row's sums do not depend on the rows per workgroup.
    pub rows: u32,
    /// On the rows mapping, the consecutive chunks each invocation takes at a time (one of
    /// [`ROWS_SLOTS`]; 1 on the classic mapping): invocation i takes chunks `S i .. S i + S`,
    /// then `S (i + WG) ..`, so a slot of 2 is the 16 values of a k-quant's scale slot and a
    /// slot of 4 a whole 32-value block, whose scales the invocation then decodes once for them
    /// all (the slot's chunks lie in one block: every block format has a multiple of 4 parts).
    /// Other sums than a slot of 1 (each invocation its own chunks), within the same bound; a
    /// row's sums do not depend on the rows per workgroup or the unrolling.
    pub slot: u32,
    /// x read four values per load (K a multiple of 4, x 16-byte aligned).
    pub vec_x: bool,
    /// F16 and BF16: the weight read four words (eight values) per load (rows of whole 16-byte
    /// chunks from a 16-byte aligned start). Same values, same sums.
    pub vec_w: bool,
    /// A row's invocations reduce their sums with subgroup shuffles (wgpu's `SUBGROUP` feature;
    /// `threads` at most the adapter's smallest subgroup) instead of workgroup memory. Same
    /// sums, bit for bit. Never set for one invocation per row.
    pub subgroups: bool,
    /// With one invocation per row: 1, or the lanes of a subgroup (2, 4 or 8; at most the
    /// adapter's smallest subgroup) that share each read of x: each reads one of every
    /// `x_lanes` values (with vec4 x, four of every `4 x_lanes`, a block's parts taken 32 values
    /// at a time) and `subgroupBroadcast` hands them to all (every row reads the same x). Same
    /// values, same sums.
    pub x_lanes: u32,
    /// With several invocations per row: 8-value chunks per loop step, 1 or 4
    /// ([`MATVEC_UNROLL`]). Unrolled, an invocation decodes that many of its chunks (`T` apart)
    /// before it sums any, so that their loads are in flight together (a GPU waits out a memory
    /// latency per step: at 4096 × 4096 a row of 32 invocations takes 16 steps), and adds them
    /// in the same order: the same sums, bit for bit.
    pub unroll: u32,
    /// How it sums ([`Precision`]; [`KernelKey::with_precision`]). `Exact` for matvec_id and
    /// for a format outside [`INT_DOT_FORMATS`](super::super::INT_DOT_FORMATS). For a format in
    /// it: `Factored` (either mapping; `chunk_factored.wgsl`: each part's `d·Σq·x + m·Σx`, x in
    /// f32, x not shared across lanes; bound of [`crate::ops::mul_mat_factored`]) or `Int8`, the
    /// integer path (either mapping; `matvec_q8.wgsl` on the classic one, `chunk_int8.wgsl` on
    /// the rows mapping: x quantised to int8 codes beforehand, products through
    /// `dot4I8Packed`; x is then the codes and scales, not f32 values, so `vec_x`, `vec_w` and
    /// `x_lanes` are off, and the classic mapping's loop is never unrolled; bound of
    /// [`crate::ops::mul_mat_int_dot`]).
    pub precision: Precision,
    /// binary16 (F16 weights, the block formats' f16 scales) converted by the device's
    /// `unpack2x16float`, one instruction per value where the integer conversion every other
    /// kernel composes takes about ten (`shaders/lib/half_unpack.wgsl`). Only for a format that
    /// reads binary16 ([`reads_f16`]), and only where the engine found the device's conversion
    /// exact ([`MatVecPolicy::hw_f16_for`]): the same values, so the same sums, bit for bit. Needs
    /// naga's `SHADER_FLOAT16_IN_FLOAT32` (every Vulkan, Metal, DX12 and GL adapter but
    /// llvmpipe without `shader-f16`).
    pub hw_f16: bool,
}

impl MatVec {
    /// The classic mapping: `columns` columns, `threads` invocations per row, scalar or vec4 x,
    /// every other choice at its default.
    pub const fn classic(columns: u32, threads: u32, vec_x: bool) -> MatVec {
        MatVec {
            columns,
            threads,
            rows: 0,
            slot: 1,
            vec_x,
            vec_w: false,
            subgroups: false,
            x_lanes: 1,
            unroll: 1,
            precision: Precision::Exact,
            hw_f16: false,
        }
    }

    /// Invocations per workgroup (`@workgroup_size`, the WGSL's `WG`).
    pub const fn workgroup_size(&self) -> u32 {
        if self.rows > 0 {
            self.threads
        } else {
            WORKGROUP_SIZE
        }
    }

    /// Weight rows one workgroup computes.
    pub const fn rows_per_group(&self) -> u32 {
        if self.rows > 0 {
            self.rows
        } else {
            WORKGROUP_SIZE / self.threads
        }
    }

    /// The named constants of the composed WGSL besides `WG` (`B` columns, and `R`, `S` and `U` on
    /// the rows mapping or `T` and `R` on the classic one).
    pub(in crate::gpu::kernels) fn consts(&self) -> Vec<(&'static str, u32)> {
        if self.rows > 0 {
            vec![
                ("B", self.columns),
                ("R", self.rows),
                ("S", self.slot),
                ("U", self.unroll),
            ]
        } else {
            vec![
                ("B", self.columns),
                ("T", self.threads),
                ("R", self.rows_per_group()),
            ]
        }
    }

    /// Whether the kernel uses subgroup operations (wgpu's `SUBGROUP` feature): the subgroup
    /// row reduction or shared reads of x.
    pub const fn uses_subgroups(&self) -> bool {
        self.subgroups || self.x_lanes > 1
    }
    /// Whether the kernel reads a format's 16-entry table (IQ4_NL, IQ4_XS, NVFP4) from
    /// workgroup memory, filled once per workgroup (`shaders/lib/lookup_wg.wgsl`), rather than
    /// from a `vec4<u32>` constant: the GPU-shaped variants, the rows mapping and several
    /// invocations per row. The same values, so the same sums. AMD's compiler (navi31) takes
    /// 16.5 instructions per IQ4_XS weight with the constant and 8.0 with the table, on the best
    /// rows variant; CPU adapters (one invocation per row) keep the constant, which their SIMD
    /// lanes read as one vector select where they would load workgroup memory lane by lane.
    pub const fn lookup_wg(&self) -> bool {
        self.rows > 0 || self.threads > 1
    }
}

impl MatVec {
    /// Writes the variant as [`Display`](std::fmt::Display) does, with or without the columns
    /// (matvec_id has one).
    pub(in crate::gpu::kernels) fn write(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        columns: bool,
    ) -> std::fmt::Result {
        if columns {
            write!(f, ".c{}", self.columns)?;
        }
        if self.rows > 0 {
            write!(f, ".w{}.r{}", self.threads, self.rows)?;
            if self.slot > 1 {
                write!(f, ".s{}", self.slot)?;
            }
            write!(f, ".u{}", self.unroll)?;
        } else {
            write!(f, ".t{}.u{}", self.threads, self.unroll)?;
        }
        for (on, s) in [
            (self.vec_x, ".vx"),
            (self.vec_w, ".vw"),
            (self.subgroups, ".sg"),
            (self.precision == Precision::Int8, ".int"),
            (self.precision == Precision::Factored, ".fac"),
        ] {
            if on {
                f.write_str(s)?;
            }
        }
        if self.x_lanes > 1 {
            write!(f, ".xl{}", self.x_lanes)?;
        }
        if self.hw_f16 {
            f.write_str(".hf")?;
        }
        Ok(())
    }
}

/// `.c1.t32.u4.vx.sg` (classic) or `.c1.w128.r2.u2.vx.sg` (rows; `.c1.w64.r2.s2.u1.sg` with
/// slots of 2 chunks): columns, invocations per row or per workgroup and rows (and chunks per
/// slot), chunks per step, then what is on: vec4 x, four-word weight
/// reads, the subgroup reduction, the precision if not `exact`, x shared by lanes, binary16
/// converted by the device (`.hf`).
impl std::fmt::Display for MatVec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write(f, true)
    }
}

impl KernelKey {
    /// matvec of `columns` columns, `threads` invocations per row.
    pub const fn matvec(format: Format, columns: u32, threads: u32, vec_x: bool) -> KernelKey {
        KernelKey {
            format,
            variant: Variant::MatVec(MatVec::classic(columns, threads, vec_x)),
        }
    }

    /// matvec of `columns` columns on the rows mapping ([`MatVec::rows`]): `workgroup`
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
            format,
            variant: Variant::MatVec(MatVec {
                rows,
                ..MatVec::classic(columns, workgroup, vec_x)
            }),
        })
    }

    /// This key with its matvec variant `v` (matvec and matvec_id; other keys unchanged).
    const fn with_matvec(self, v: MatVec) -> KernelKey {
        let variant = match self.variant {
            Variant::MatVec(_) => Variant::MatVec(v),
            Variant::MatVecId(_) => Variant::MatVecId(v),
            other => other,
        };
        KernelKey { variant, ..self }
    }

    /// This matvec or matvec_id key with the subgroup reduction where `on` and the key has more
    /// than one invocation per row (else unchanged).
    pub const fn with_subgroups(self, on: bool) -> KernelKey {
        match self.matvec_variant() {
            Some(v) => self.with_matvec(MatVec {
                subgroups: on && v.threads > 1,
                ..v
            }),
            None => self,
        }
    }

    /// This matvec or matvec_id key with x read once per `lanes` rows through subgroup
    /// broadcasts ([`MatVec::x_lanes`]) where the key has one invocation per row and `lanes`
    /// is 2, 4 or 8 (else unchanged).
    pub const fn with_x_lanes(self, lanes: u32) -> KernelKey {
        match self.matvec_variant() {
            Some(v)
                if v.threads == 1
                    && v.rows == 0
                    && matches!(v.precision, Precision::Exact)
                    && matches!(lanes, 2 | 4 | 8) =>
            {
                self.with_matvec(MatVec {
                    x_lanes: lanes,
                    ..v
                })
            }
            _ => self,
        }
    }

    /// This matvec or matvec_id key with four chunks per loop step ([`MatVec::unroll`]) where
    /// `on`, the key has more than one invocation per row and is not the classic mapping's
    /// integer path (else unchanged). On the rows mapping, four chunks per step in all:
    /// `4 / (rows × slot)` slots of each row (at least one).
    pub const fn with_unroll(self, on: bool) -> KernelKey {
        match self.matvec_variant() {
            Some(v)
                if on
                    && v.threads > 1
                    && !(matches!(v.precision, Precision::Int8) && v.rows == 0) =>
            {
                let per_row = if v.rows > 0 {
                    MATVEC_UNROLL / (v.rows * v.slot)
                } else {
                    MATVEC_UNROLL
                };
                self.with_matvec(MatVec {
                    unroll: if per_row == 0 { 1 } else { per_row },
                    ..v
                })
            }
            _ => self,
        }
    }

    /// This matvec key on the rows mapping with `slot` consecutive chunks per invocation
    /// ([`MatVec::slot`]) where that is a variant (one of [`ROWS_SLOTS`], rows × slot at most
    /// [`ROWS_MAX_SLOT_CHUNKS`]; else unchanged). An unrolled key stays unrolled, by its
    /// rule.
    pub const fn with_slot(self, slot: u32) -> KernelKey {
        match self.matvec_variant() {
            Some(v)
                if v.rows > 0
                    && matches!(slot, 1 | 2 | 4)
                    && v.rows * slot <= ROWS_MAX_SLOT_CHUNKS =>
            {
                let key = self.with_matvec(MatVec {
                    slot,
                    unroll: 1,
                    ..v
                });
                key.with_unroll(v.unroll > 1)
            }
            _ => self,
        }
    }

    /// This matvec or matvec_id key with the weight read four words per load
    /// ([`MatVec::vec_w`]) where `on` and the format has that reader (F16, BF16; else
    /// unchanged).
    pub const fn with_vec_w(self, on: bool) -> KernelKey {
        match self.matvec_variant() {
            Some(v) => self.with_matvec(MatVec {
                vec_w: on && matches!(self.format, Format::F16 | Format::BF16),
                ..v
            }),
            None => self,
        }
    }

    /// This matvec key summing in `precision` ([`MatVec::precision`]) where a kernel of it
    /// honours that mode, else unchanged (`Exact`): `Factored` for a format with parts `d·q + m`
    /// (x then read by every lane itself), `Int8` for such a format on either mapping (x's
    /// codes read by every lane itself, one chunk of each row per step).
    pub const fn with_precision(self, precision: Precision) -> KernelKey {
        let v = match self.variant {
            Variant::MatVec(v) if int_dot_min(self.format).is_some() => v,
            _ => return self,
        };
        match precision {
            Precision::Factored => self.with_matvec(MatVec {
                precision,
                vec_w: false,
                x_lanes: 1,
                ..v
            }),
            Precision::Int8 => self.with_matvec(MatVec {
                precision,
                vec_x: false,
                vec_w: false,
                x_lanes: 1,
                unroll: 1,
                ..v
            }),
            _ => self,
        }
    }

    /// Whether the kernel uses subgroup operations (wgpu's `SUBGROUP` feature): a matvec
    /// variant's subgroup row reduction or shared reads of x ([`MatVec::uses_subgroups`]).
    pub const fn uses_subgroups(&self) -> bool {
        match self.matvec_variant() {
            Some(v) => v.uses_subgroups(),
            None => false,
        }
    }

    /// This matvec or matvec_id key with binary16 converted by the device's
    /// `unpack2x16float` ([`MatVec::hw_f16`]) where `on` and the format reads binary16
    /// ([`reads_f16`]; else unchanged).
    pub const fn with_hw_f16(self, on: bool) -> KernelKey {
        match self.matvec_variant() {
            Some(v) => self.with_matvec(MatVec {
                hw_f16: on && reads_f16(self.format),
                ..v
            }),
            None => self,
        }
    }

    /// Whether the kernel converts binary16 with `unpack2x16float` (naga's
    /// `SHADER_FLOAT16_IN_FLOAT32`; [`MatVec::hw_f16`]).
    pub const fn uses_unpack_f16(&self) -> bool {
        match self.matvec_variant() {
            Some(v) => v.hw_f16,
            None => false,
        }
    }
}

/// Whether `format`'s decoder reads binary16 values (F16 itself, or the f16 scales of the block
/// formats): every format with a shader but F32, BF16, F8_E4M3, MXFP4, NVFP4 and Q8_K.
pub const fn reads_f16(format: Format) -> bool {
    format.has_shader()
        && !matches!(
            format,
            Format::F32
                | Format::BF16
                | Format::F8_E4M3
                | Format::MXFP4
                | Format::NVFP4
                | Format::Q8_K
        )
}

/// `key` and its variants: the weight read four words per load where the format can, and
/// for each the subgroup ones (the row reduction for several invocations per row, x shared by
/// 2, 4 and 8 lanes for one) and for several invocations per row the unrolled ones.
pub(super) fn push_matvec(out: &mut Vec<KernelKey>, key: KernelKey) {
    let wide = key.with_vec_w(true);
    let readers: &[KernelKey] = if wide != key { &[key, wide] } else { &[key] };
    for &key in readers {
        out.push(key);
        if key.matvec_variant().is_some_and(|v| v.threads > 1) {
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
    let readers: &[KernelKey] = if wide != key { &[key, wide] } else { &[key] };
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

/// The matvec variants of `format`: columns 1..=8 and [`MATMUL_CPU_COLUMNS`] on the classic
/// mapping for every entry of [`MATVEC_THREADS`], scalar and vec4 x, F16 and BF16 weights read
/// a word or four words per load, both row reductions, rolled and unrolled rows, x shared by 2,
/// 4 and 8 lanes; the rows mapping in every shape and slot; the factored sums and the integer path of the
/// formats that have them; and each of them again with binary16 converted by the device where
/// the format reads it.
pub(in crate::gpu::kernels) fn keys(format: Format) -> Vec<KernelKey> {
    let columns = (1..=MATVEC_MAX_BATCH).chain([MATMUL_CPU_COLUMNS]);
    let mut out = Vec::new();
    for c in columns {
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
                    push_matvec(&mut out, key.with_precision(Precision::Factored));
                }
            }
        }
    }
    for c in 1..=MATVEC_MAX_BATCH {
        for wg in ROWS_WORKGROUPS {
            for r in ROWS_PER_GROUP {
                for (v, slot) in [false, true]
                    .into_iter()
                    .flat_map(|v| ROWS_SLOTS.map(|s| (v, s)))
                {
                    let Some(key) = KernelKey::matvec_rows(format, c, wg, r, v) else {
                        continue;
                    };
                    let key = key.with_slot(slot);
                    if key.matvec_variant().is_some_and(|k| k.slot == slot) {
                        push_rows(&mut out, key);
                        let factored = key.with_precision(Precision::Factored);
                        if factored != key {
                            push_rows(&mut out, factored);
                            // The integer path reads x's codes, never vec4 x.
                            if !v {
                                push_rows(&mut out, key.with_precision(Precision::Int8));
                            }
                        }
                    }
                }
            }
        }
    }
    with_hw_f16(out)
}

/// `keys` and, for a format that reads binary16, each of them converting it by the device
/// ([`MatVec::hw_f16`]).
pub(super) fn with_hw_f16(mut keys: Vec<KernelKey>) -> Vec<KernelKey> {
    let hw: Vec<KernelKey> = keys
        .iter()
        .map(|k| k.with_hw_f16(true))
        .filter(|k| k.uses_unpack_f16())
        .collect();
    keys.extend(hw);
    keys
}

/// The WGSL of a matvec or matvec_id (`op`) kernel of `format` in variant `v`: the variant's constants (`B` columns, `T` invocations
/// per row or `WG`, `R` and `S` on the rows mapping, `U` chunks or slots per loop step), the grids binding
/// where the format reads it, the format's decode module, `rows.wgsl`, the chunk of the
/// precision (`chunk_exact.wgsl`, `chunk_factored.wgsl`), the params and bindings
/// (`matvec_io.wgsl`), the x reader, the row reduction and the kernel file, then on the classic
/// mapping the row dot (`row_dot.wgsl` and `block_dot`), or on the integer path
/// `matvec_q8.wgsl` alone.
pub(in crate::gpu::kernels) fn source(format: Format, op: Op, v: &MatVec) -> Result<String> {
    // The GPU-shaped variants (the rows mapping, several invocations per row) read the 16-entry
    // tables from workgroup memory ([`MatVec::lookup_wg`]). Every entry point calls
    // `w_lookup_begin` first, which a decoder without tables does not declare.
    let swaps = Swaps {
        unpack_f16: v.hw_f16,
        lookup_wg: v.lookup_wg(),
    };
    let mut module = compose::module(format, "", swaps)?;
    if !uses_lookup(format) {
        module += "\nfn w_lookup_begin(i: u32) {}\n";
    }
    let header = if v.rows > 0 {
        format!(
            "const B: u32 = {}u;\nconst WG: u32 = {}u;\nconst R: u32 = {}u;\nconst S: u32 = {}u;\nconst U: u32 = {}u;\n",
            v.columns, v.threads, v.rows, v.slot, v.unroll
        )
    } else {
        format!(
            "const B: u32 = {}u;\nconst T: u32 = {}u;\nconst U: u32 = {}u;\n",
            v.columns, v.threads, v.unroll
        )
    };
    let grids = compose::grids(format, op);
    let x8 = if v.x_lanes > 1 {
        x_shared(v)
    } else if v.vec_x {
        kernel_file!("x_vec4").to_string()
    } else {
        kernel_file!("x_scalar").to_string()
    };
    let x8 = format!("{x8}\n{}", kernel_file!("x_tail"));
    // Shared x reads take their lane from lane_subgroup.wgsl's `Lane` (one invocation per row
    // never reduces).
    let reduce = match (v.rows > 0, v.uses_subgroups()) {
        (true, true) => concat!(
            kernel_file!("lane_subgroup"),
            kernel_file!("reduce_rows_subgroup")
        ),
        (true, false) => concat!(kernel_file!("lane_local"), kernel_file!("reduce_rows_tree")),
        (false, true) => concat!(
            kernel_file!("lane_subgroup"),
            kernel_file!("reduce_subgroup")
        ),
        (false, false) => concat!(kernel_file!("lane_local"), kernel_file!("reduce_tree")),
    };
    // The matvec kernels' Params and bindings.
    let io = kernel_file!("matvec_io");
    let one_value8 = compose::one_value8(v.vec_w.then_some(number(Buf::WV)));
    if v.rows > 0 {
        // The chunk of the precision and the x binding and reader it reads (chunk_int8.wgsl
        // brings its own: x's codes; the classic mapping's f32 x is in row_dot.wgsl).
        let x_f32 = format!(
            "@group({}) @binding({}) var<storage, read> x: array<f32>;\n\n",
            binding::STORAGE_GROUP,
            number(Buf::X)
        );
        let (chunks, x8) = match v.precision {
            Precision::Int8 => (kernel_file!("chunk_int8"), String::new()),
            Precision::Factored => (kernel_file!("chunk_factored"), format!("{x_f32}{x8}")),
            _ => (kernel_file!("chunk_exact"), format!("{x_f32}{x8}")),
        };
        return Ok(format!(
            "{header}{grids}{module}\n{one_value8}\n{}\n{chunks}\n{}\n{}\n{}\n{}\n{io}\n{x8}\n{reduce}\n{}",
            kernel_file!("rows"),
            slot_chunks(v.slot),
            slot_dot(v.precision, v.slot),
            rows_step("rows_step_u", v, v.unroll),
            rows_step("rows_step_1", v, 1),
            kernel_file!("matvec_rows")
        ));
    }
    if matches!(v.precision, Precision::Int8) {
        return Ok(format!(
            "{header}{grids}{module}\n{reduce}\n{io}\n{}\n{}",
            op.wgsl(),
            kernel_file!("matvec_q8")
        ));
    }
    // What a chunk is and its dot with x, by precision.
    let chunks = match v.precision {
        Precision::Factored => kernel_file!("chunk_factored"),
        _ => kernel_file!("chunk_exact"),
    };
    let block = format!("{}\n{}", kernel_file!("row_dot"), block_dot(format, v));
    Ok(format!(
        "{header}{grids}{module}\n{one_value8}\n{}\n{chunks}\n{io}\n{x8}\n{reduce}\n{}\n{block}",
        kernel_file!("rows"),
        op.wgsl()
    ))
}

/// `slot_chunks` of the rows mapping (`matvec_rows.wgsl`): the `slot` chunks of slot q of a row,
/// written out so that the compiler decodes what they share once (a loop would put each chunk
/// behind wgpu's loop-bounding check). A slot lies in one block ([`MatVec::slot`]): the block
/// is named once and its parts `p .. p + slot` decoded; one-value formats read the slot's
/// chunks; a slot of one chunk is `chunk` itself.
fn slot_chunks(slot: u32) -> String {
    let each = |f: &dyn Fn(u32) -> String| (0..slot).map(f).collect::<Vec<_>>().join(", ");
    let body = if slot == 1 {
        "    return array<Chunk, 1>(chunk(row_base, q));\n".to_string()
    } else {
        format!(
            "    let first = S * q;\n    if (w_BLOCK_ELEMS == 1u) {{\n        return array<Chunk, S>({});\n    }}\n    let parts = max(w_BLOCK_ELEMS / 8u, 1u);\n    let block = row_base + (first / parts) * w_BLOCK_BYTES;\n    let p = first % parts;\n    return array<Chunk, S>({});\n",
            each(&|s| format!("chunk(row_base, first + {s}u)")),
            each(&|s| format!("part_chunk(block, p + {s}u)"))
        )
    };
    format!("// The chunks S q .. S q + S of the row at byte `row_base` (slot q).\nfn slot_chunks(row_base: u32, q: u32) -> array<Chunk, S> {{\n{body}}}\n")
}

/// `rows_step_u` and `rows_step_1` of the rows mapping (`matvec_rows.wgsl`): one step of its
/// loop over slots, `u` (the variant's U, or 1) slots of each of the R rows from slot q (q,
/// q + WG, ...) decoded before any is summed, then per slot and column its x read once and
/// added to the R rows' sums, in the order of loops over the slots, the columns and the rows.
/// Written out per variant, as [`slot_chunks`]: looped, each of these loops sat behind wgpu's
/// loop-bounding check, which kept AMD's compiler from unrolling them (navi31, F16 at rows 64x2
/// with slots of 4: 5.7 instructions per weight looped, 2.1 with no bounding at all).
fn rows_step(name: &str, v: &MatVec, u: u32) -> String {
    let mut s = format!(
        "fn {name}(acc: ptr<function, array<f32, RB>>, base: array<u32, R>, q: u32, k: u32) {{\n"
    );
    for i in 0..u {
        for r in 0..v.rows {
            s += &format!("    let v{i}_{r} = slot_chunks(base[{r}], q + {i}u * WG);\n");
        }
    }
    for i in 0..u {
        s += &format!("    let at{i} = params.x_skip + 8u * S * (q + {i}u * WG);\n");
        for b in 0..v.columns {
            s += &format!("    let xs{i}_{b} = slot_x(at{i} + {b}u * k);\n");
            for r in 0..v.rows {
                let j = r * v.columns + b;
                s += &format!("    (*acc)[{j}] = slot_dot((*acc)[{j}], v{i}_{r}, xs{i}_{b});\n");
            }
        }
    }
    s + "}\n"
}

/// `slot_x` and `slot_dot` of the rows mapping (`matvec_rows.wgsl`), written out as
/// [`slot_chunks`]: the x of a slot of `slot` chunks, read once per column for the R rows, and a
/// sum plus the slot's dot with it. Chunk by chunk in chunk order (`x8`, `chunk_dot`), except
/// int8 slots of several chunks: x's codes, the block's scale dx and the quantiser's Σq of the
/// slot's values, then per group of chunks sharing d and m (`w_QPART8_GROUP`) one integer sum,
/// `dx (d Σ q xq + m Σ xq)`.
fn slot_dot(precision: Precision, slot: u32) -> String {
    let each =
        |f: &dyn Fn(u32) -> String, sep: &str| (0..slot).map(f).collect::<Vec<_>>().join(sep);
    if precision != Precision::Int8 || slot == 1 {
        return format!(
            "// x of the slot's chunks, the first at value o.\nalias SlotX = array<XChunk, S>;\nfn slot_x(o: u32) -> SlotX {{\n    return SlotX({});\n}}\n\n// acc plus the slot's chunks dotted with their x, chunk by chunk.\nfn slot_dot(acc: f32, v: array<Chunk, S>, xs: SlotX) -> f32 {{\n    var s = acc;\n{}    return s;\n}}\n",
            each(&|c| format!("x8(o + {}u)", 8 * c), ", "),
            each(&|c| format!("    s += chunk_dot(v[{c}], xs[{c}]);\n"), "")
        );
    }
    let words = 2 * slot;
    let codes = (0..words)
        .map(|w| format!("x[w + {w}u]"))
        .collect::<Vec<_>>()
        .join(", ");
    // Σq of the slot's values: one half of the block's word for 16 values, the word for 32.
    let sums = if slot == 2 {
        "select(sums >> 16u, sums & 0xFFFFu, (v & 16u) == 0u)"
    } else {
        "sums"
    };
    let dots = |from: u32, to: u32| {
        (from..to)
            .map(|c| {
                format!(
                    "dot4I8Packed(v[{c}].x, xs[{}]) + dot4I8Packed(v[{c}].y, xs[{}])",
                    2 * c,
                    2 * c + 1
                )
            })
            .collect::<Vec<_>>()
            .join(" + ")
    };
    // The low and high i16 of the sums word, sign-extended.
    let sums_at = words + 1;
    let lo = format!("f32(bitcast<i32>(xs[{sums_at}] << 16u) >> 16u)");
    let hi = format!("f32(bitcast<i32>(xs[{sums_at}]) >> 16u)");
    let body = if slot == 2 {
        format!(
            "    let i = {};\n    var s = bitcast<f32>(v[0].z) * f32(i);\n    if (w_QPART8_MIN) {{\n        s += bitcast<f32>(v[0].w) * {lo};\n    }}\n",
            dots(0, 2)
        )
    } else {
        format!(
            "    let i0 = {};\n    let i1 = {};\n    var s: f32;\n    if (w_QPART8_GROUP >= 4u) {{\n        s = bitcast<f32>(v[0].z) * f32(i0 + i1);\n        if (w_QPART8_MIN) {{\n            s += bitcast<f32>(v[0].w) * ({lo} + {hi});\n        }}\n    }} else {{\n        s = bitcast<f32>(v[0].z) * f32(i0) + bitcast<f32>(v[2].z) * f32(i1);\n        if (w_QPART8_MIN) {{\n            s += bitcast<f32>(v[0].w) * {lo} + bitcast<f32>(v[2].w) * {hi};\n        }}\n    }}\n",
            dots(0, 2),
            dots(2, 4)
        )
    };
    format!(
        "// x's codes of the slot (values o ..), their block's scale dx and Σq of the slot's values.\nalias SlotX = array<u32, {}>;\nfn slot_x(o: u32) -> SlotX {{\n    let v = o - params.x_skip;\n    let w = v / 4u;\n    let d = B * (params.k / 4u) + v / 32u;\n    let sums = x[d + B * (params.k / 32u)];\n    return SlotX({codes}, x[d], {sums});\n}}\n\n// acc plus the slot's dot with its x: an integer sum per group of chunks sharing d and m (the\n// slot's parts share them in pairs at least: QPART8_GROUP), dx (d Σ q xq + m Σ xq).\nfn slot_dot(acc: f32, v: array<Chunk, S>, xs: SlotX) -> f32 {{\n{body}    return acc + bitcast<f32>(xs[{words}]) * s;\n}}\n",
        words + 2
    )
}

/// x_shared.wgsl, its `x8` for `v.x_lanes` lanes (`subgroupBroadcast` takes a constant
/// lane, so the reader is written out here: lane `l` reads values `l, l + lanes, ...` of the
/// eight, and value `j` is lane `j % lanes`'s read `j / lanes`) and with vec4 x the `xv`
/// binding [`group_dot`] reads.
fn x_shared(v: &MatVec) -> String {
    let lanes = v.x_lanes;
    let reads: String = (0..8 / lanes)
        .map(|i| format!("    let s{i} = x[o + {}u + x_lane];\n", i * lanes))
        .collect();
    let value = |j: u32| format!("subgroupBroadcast(s{}, {}u)", j / lanes, j % lanes);
    let half = |h: u32| {
        let v: Vec<String> = (4 * h..4 * h + 4).map(value).collect();
        format!("vec4<f32>({})", v.join(", "))
    };
    let xv = if v.vec_x {
        format!(
            "@group({}) @binding({}) var<storage, read> xv: array<vec4<f32>>;\n",
            binding::STORAGE_GROUP,
            number(Buf::XV)
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
fn block_dot(format: Format, v: &MatVec) -> String {
    let parts = (format.block_elems() / 8).max(4);
    let unrolled = v.columns == 1 && v.threads == 1;
    if v.x_lanes > 1 && v.vec_x {
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
            group_dot(v.x_lanes)
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

impl Plan {
    /// The policy: the mapping and precision one matvec dispatch of `columns` columns on a weight
    /// of `format` with `k` values per row runs in, asked for `asked` (the tuner's choice, a
    /// forced variant or [`MatVecPolicy::mapping`]). The precision is the plan's where a kernel
    /// honours it, else `exact`; more than [`MATVEC_MAX_BATCH`] columns (matmul's matvecs on CPU
    /// adapters) run on the classic mapping.
    pub fn matvec_choice(
        &self,
        format: Format,
        k: u64,
        columns: u64,
        asked: Mapping,
    ) -> (Mapping, Precision) {
        let precision = self.precision.honoured(Op::MatVec, format, k);
        let mapping = if columns > MATVEC_MAX_BATCH as u64 {
            Mapping::Classic
        } else {
            asked
        };
        (mapping, precision)
    }

    /// The matvec kernel of `columns` columns of `format` on `mapping` summing in `precision`
    /// where it can ([`KernelKey::with_precision`]), with this plan's reductions, shared x,
    /// unrolling and binary16 conversion; `None` for a rows shape that is no variant at that many columns.
    pub fn matvec_key(
        &self,
        format: Format,
        columns: u32,
        (vec_x, vec_w): (bool, bool),
        precision: Precision,
        mapping: Mapping,
    ) -> Option<KernelKey> {
        let m = &self.matvec;
        Some(match mapping {
            Mapping::Rows(shape) => {
                let r = shape.rows_for(columns);
                KernelKey::matvec_rows(format, columns, shape.workgroup, r, vec_x)?
                    .with_slot(shape.slot)
                    .with_vec_w(vec_w)
                    .with_subgroups(m.rows_subgroups(shape))
                    .with_precision(precision)
                    .with_unroll(m.unroll)
                    .with_hw_f16(m.hw_f16_for(format))
            }
            Mapping::Classic => KernelKey::matvec(format, columns, m.threads, vec_x)
                .with_vec_w(vec_w)
                .with_subgroups(m.classic_subgroups())
                .with_x_lanes(m.x_lanes())
                .with_precision(precision)
                .with_unroll(m.unroll)
                .with_hw_f16(m.hw_f16_for(format)),
        })
    }
}

/// Which product a [`MulCall`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MulOp {
    /// 1 to [`MATVEC_MAX_BATCH`] columns, on the given mapping or the policy's.
    MatVec(Option<Mapping>),
    /// Any number of columns: tiled, or on CPU adapters (one invocation per row) as matvecs of
    /// up to [`MATMUL_CPU_COLUMNS`] columns.
    MatMul,
}

/// One product `Y = W X` to plan.
#[derive(Clone, Debug)]
pub struct MulCall<'a> {
    /// The weight.
    pub weight: WeightLayout<'a>,
    /// Columns of X and Y.
    pub batch: u64,
    /// X, `batch × K` f32.
    pub x: Extent,
    /// Y, `batch × N` f32.
    pub y: Extent,
    /// The product.
    pub op: MulOp,
}

/// One kernel's uniform parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MulParams {
    /// A matvec dispatch's.
    MatVec(MatVecParams),
    /// A tiled matmul dispatch's.
    MatMul(MatMulParams),
}

impl MulParams {
    /// The bytes the uniform holds.
    pub fn bytes(&self) -> &[u8] {
        match self {
            MulParams::MatVec(p) => bytemuck::bytes_of(p),
            MulParams::MatMul(p) => bytemuck::bytes_of(p),
        }
    }
}

/// One dispatch of a [`ColumnGroup`]: one run of weight rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulDispatch {
    /// The run ([`MulPlan::runs`]) bound as the weight.
    pub run: usize,
    /// The span of Y bound.
    pub y: Span,
    /// The parameters.
    pub params: MulParams,
    /// Workgroups in x, y and z.
    pub grid: (u32, u32, u32),
}

/// The integer path's quantiser of one column group: x's int8 codes (word 0 on), then one scale
/// per 32 values, then one word of sums of codes per 32 values, in a scratch buffer of `bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantizePlan {
    /// Blocks of 32 values.
    pub blocks: u64,
    /// Bytes of the scratch buffer used.
    pub bytes: u64,
    /// Workgroups in x and y.
    pub grid: (u32, u32),
}

/// Bytes of the integer path's x per 32 values (`quantize_q8.wgsl`): 32 codes, the scale, the
/// sums of the codes.
pub const XQ_BLOCK_BYTES: u64 = 40;

/// The columns one kernel covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnGroup {
    /// The first column.
    pub first: u64,
    /// Columns.
    pub columns: u64,
    /// The kernel.
    pub key: KernelKey,
    /// The variant the policy picked (matmul's tiled kernel: [`Mapping::Classic`]).
    pub mapping: Mapping,
    /// The span of X bound (on the integer path: the quantiser's input).
    pub x: Span,
    /// The quantiser to run first (precision `int8`).
    pub quantize: Option<QuantizePlan>,
    /// One dispatch per run of rows.
    pub dispatches: Vec<MulDispatch>,
}

/// Every dispatch of one product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MulPlan {
    /// The weight's shape.
    pub shape: Shape,
    /// Its runs of rows.
    pub runs: Vec<RowRun>,
    /// The precision the products sum in.
    pub precision: Precision,
    /// The kernels, in column order.
    pub groups: Vec<ColumnGroup>,
}

/// Plans `call` on `plan`: `tuned` gives the mapping the tuner chose for a [`MappingKey`] (else
/// [`MatVecPolicy::mapping`]). Checks everything the kernels rely on: shapes, operand spans,
/// binding sizes and grid limits; every count in the parameters and the grid fits `u32`.
pub fn plan_mul(
    plan: &Plan,
    call: &MulCall<'_>,
    tuned: &dyn Fn(MappingKey) -> Mapping,
) -> Result<MulPlan> {
    let (tiled, matvec_cols, forced) = match call.op {
        MulOp::MatVec(forced) => {
            if call.batch == 0 || call.batch > MATVEC_MAX_BATCH as u64 {
                return Err(invalid(format!(
                    "matvec takes 1 to {MATVEC_MAX_BATCH} columns, not {} (use matmul)",
                    call.batch
                )));
            }
            (false, MATVEC_MAX_BATCH as u64, forced)
        }
        MulOp::MatMul => {
            if call.batch == 0 {
                return Err(invalid("matmul needs at least one column".into()));
            }
            (plan.matvec.threads > 1, MATMUL_CPU_COLUMNS as u64, None)
        }
    };
    let w = &call.weight;
    let s = Shape::of(w)?;
    let align = plan.align;
    let batch = call.batch;
    let tile = MATMUL_TILE as u64;
    // Columns per dispatch: X and Y spans within a binding.
    let room = plan.max_binding.saturating_sub(align);
    let max_cols = if tiled {
        plan.max_dim.saturating_mul(tile)
    } else {
        matvec_cols
    };
    let precision = if tiled {
        Precision::Exact
    } else {
        plan.precision.honoured(Op::MatVec, s.format, s.k)
    };
    // The integer path's codes, scales and sums ([`XQ_BLOCK_BYTES`] per 32 values) fit a
    // binding too, and the quantiser's workgroups (one value block per invocation) a grid.
    let max_codes = if precision == Precision::Int8 {
        let grid = plan.max_dim.saturating_mul(plan.max_dim);
        (room / XQ_BLOCK_BYTES * 32 / s.k)
            .min(grid.saturating_mul(WORKGROUP_SIZE as u64 * 32) / s.k)
    } else {
        u64::MAX
    };
    let per_cols = (room / (s.k * 4))
        .min(room / s.rows.saturating_mul(4))
        .min(max_cols)
        .min(max_codes);
    if per_cols == 0 {
        return Err(GpuError::TooLarge {
            what: format!("one column of {} in a storage binding", w.name),
            bytes: s.k.max(s.rows).saturating_mul(4).saturating_add(align),
            limit: plan.max_binding,
        }
        .into());
    }
    span_of(call.x, 0, batch.saturating_mul(s.k), align, "x")?;
    span_of(call.y, 0, batch.saturating_mul(s.rows), align, "y")?;
    let max_rows = if tiled {
        plan.max_dim.saturating_mul(tile)
    } else {
        plan.max_dim.saturating_mul(plan.max_dim)
    };
    let runs = row_runs(plan, w, &s, max_rows)?;
    let vec_w = !tiled && aligned_rows(&s, &runs);
    let mut groups = Vec::new();
    let mut c0 = 0;
    while c0 < batch {
        let cols = per_cols.min(batch - c0);
        let x = span_of(call.x, c0 * s.k, cols * s.k, align, "x")?;
        let vec_x = !tiled && s.k.is_multiple_of(4) && x.skip.is_multiple_of(4);
        let (key, mapping) = if tiled {
            (KernelKey::matmul(s.format), Mapping::Classic)
        } else {
            let asked = forced.unwrap_or_else(|| tuned((s.format, s.k, s.rows, cols as u32)));
            let (mapping, precision) = plan.matvec_choice(s.format, s.k, cols, asked);
            let key = plan
                .matvec_key(s.format, cols as u32, (vec_x, vec_w), precision, mapping)
                .ok_or_else(|| invalid(format!("matvec {mapping} at {cols} columns")))?;
            (key, mapping)
        };
        let quantize = (key.precision() == Precision::Int8).then(|| {
            let blocks = cols * s.k / 32;
            QuantizePlan {
                blocks,
                bytes: blocks * XQ_BLOCK_BYTES,
                grid: windows::grid(blocks.div_ceil(WORKGROUP_SIZE as u64), plan.max_dim),
            }
        });
        let rows_per_group = key.rows_per_group() as u64;
        let mut dispatches = Vec::with_capacity(runs.len());
        for (i, run) in runs.iter().enumerate() {
            let y_first = c0 * s.rows + run.first;
            let y = span_of(call.y, y_first, (cols - 1) * s.rows + run.count, align, "y")?;
            let (params, grid) = if tiled {
                matmul::dispatch(&s, run, cols, x, y)
            } else {
                let p = MatVecParams {
                    k: s.k as u32,
                    n_rows: run.count as u32,
                    row_bytes: s.row_bytes as u32,
                    w_skip: run.skip as u32,
                    x_skip: x.skip,
                    y_skip: y.skip,
                    y_stride: s.rows as u32,
                    ..MatVecParams::default()
                };
                let (gx, gy) = windows::grid(run.count.div_ceil(rows_per_group), plan.max_dim);
                (MulParams::MatVec(p), (gx, gy, 1))
            };
            dispatches.push(MulDispatch {
                run: i,
                y,
                params,
                grid,
            });
        }
        groups.push(ColumnGroup {
            first: c0,
            columns: cols,
            key,
            mapping,
            x,
            quantize,
            dispatches,
        });
        c0 += cols;
    }
    Ok(MulPlan {
        shape: s,
        runs,
        precision,
        groups,
    })
}

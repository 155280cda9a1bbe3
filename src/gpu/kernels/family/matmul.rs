//! The matmul family: `Y = W X` for any number of columns, tiled (`shaders/kernels/matmul.wgsl`:
//! a [`MATMUL_TILE`]-row × [`MATMUL_TILE`]-column output tile per workgroup of
//! [`WORKGROUP_SIZE`](super::super::WORKGROUP_SIZE) invocations through workgroup memory). Its key, its WGSL and its
//! dispatches; which product a call runs (tiled, or matvecs on CPU adapters) is the policy's,
//! in [`super::matvec::plan_mul`].

use super::super::compose;
use super::super::params::MatMulParams;
use super::super::plan::{RowRun, Shape, Span};
use super::super::{Buf, KernelKey, Op, StorageBinding, Variant, MATMUL_TILE};
use super::matvec::MulParams;
use crate::{Format, Result};

/// matmul's group-0 bindings (`shaders/kernels/matmul.wgsl`): the weight, x, y, the grids
/// (formats that read them).
pub const BINDINGS: &[StorageBinding] = &[
    StorageBinding::read(Buf::W, 0, 4),
    StorageBinding::read(Buf::X, 1, 4),
    StorageBinding::out(2, 4),
    StorageBinding::read(Buf::Grids, 4, 4),
];

/// The tiled matmul's variant: one today (a [`MATMUL_TILE`]² tile on
/// [`WORKGROUP_SIZE`](super::super::WORKGROUP_SIZE) invocations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatMul;

/// Nothing: the one tiled variant.
impl std::fmt::Display for MatMul {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Ok(())
    }
}

impl KernelKey {
    /// The tiled matmul.
    pub const fn matmul(format: Format) -> KernelKey {
        KernelKey {
            format,
            variant: Variant::MatMul(MatMul),
        }
    }
}

/// The matmul variants of `format`: one.
pub(in crate::gpu::kernels) fn keys(format: Format) -> Vec<KernelKey> {
    vec![KernelKey::matmul(format)]
}

/// The WGSL of the matmul of `format`: the format's decoder and the tiled kernel.
pub(in crate::gpu::kernels) fn source(format: Format) -> Result<String> {
    compose::plain_source(format, Op::MatMul, "")
}

/// The `TN` × `TB` output tile's constants the Rust side plans with.
pub(in crate::gpu::kernels) fn consts() -> [(&'static str, u32); 2] {
    [("TN", MATMUL_TILE), ("TB", MATMUL_TILE)]
}

/// One dispatch of `cols` columns on `run`: its parameters and grid (one workgroup per tile).
pub(in crate::gpu::kernels) fn dispatch(
    s: &Shape,
    run: &RowRun,
    cols: u64,
    x: Span,
    y: Span,
) -> (MulParams, (u32, u32, u32)) {
    let tile = MATMUL_TILE as u64;
    let p = MatMulParams {
        k: s.k as u32,
        n_rows: run.count as u32,
        row_bytes: s.row_bytes as u32,
        w_skip: run.skip as u32,
        x_skip: x.skip,
        y_skip: y.skip,
        y_stride: s.rows as u32,
        n_cols: cols as u32,
    };
    let groups = (
        run.count.div_ceil(tile) as u32,
        cols.div_ceil(tile) as u32,
        1,
    );
    (MulParams::MatMul(p), groups)
}

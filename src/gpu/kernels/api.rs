//! The kernels' jobs on a caller's buffers, and the engine's calls: one-line products on host
//! slices, and `record_*` into a caller's encoder, each a thin wrapper over a [`Recorder`] of its
//! own (the recorder an engine keeps across steps is [`GpuEngine::recorder`]).

use super::family::get_rows::{plan_get_rows, GetRowsCall};
use super::family::matvec::{plan_mul, MulCall, MulOp};
use super::family::matvec_id::{plan_matvec_id, MatVecIdCall};
use super::layout::{BindingKind, Program};
use super::plan::{invalid, shape, Extent, Shape};
use super::{Input, KernelKey, Op, Recorder, MATMUL_CPU_COLUMNS, MATMUL_TILE, MATVEC_MAX_BATCH};
use crate::gpu::loader::ResidentTensor;
use crate::gpu::{buffers, GpuEngine};
use crate::{DType, Format, Result};

/// A run of a caller's buffer: f32 values, u32 ids or output words from `offset` (a multiple of 4
/// bytes) on. Usage `STORAGE`.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The buffer.
    pub buffer: &'a wgpu::Buffer,
    /// Byte offset of the first element.
    pub offset: u64,
}

impl<'a> Operand<'a> {
    /// The whole buffer from its start.
    pub fn whole(buffer: &'a wgpu::Buffer) -> Operand<'a> {
        Operand { buffer, offset: 0 }
    }
}

/// `Y = W X` for [`GpuEngine::record_matvec`] and [`GpuEngine::record_matmul`].
#[derive(Clone, Copy, Debug)]
pub struct MulMatJob<'a> {
    /// The weight, `[K, N]` (more dims are folded into rows).
    pub weight: &'a ResidentTensor,
    /// `batch × K` f32 values, row-major.
    pub x: Operand<'a>,
    /// `batch × N` f32 values, row-major (written).
    pub y: Operand<'a>,
    /// Columns of X and Y.
    pub batch: u32,
}

/// Row gather for [`GpuEngine::record_get_rows`].
#[derive(Clone, Copy, Debug)]
pub struct GetRowsJob<'a> {
    /// The table, `[K, N]`.
    pub weight: &'a ResidentTensor,
    /// `n_ids` u32 row indices; an index ≥ N gives NaN values.
    pub ids: Operand<'a>,
    /// Rows to gather.
    pub n_ids: u32,
    /// `n_ids × K` values of `dtype` (written; the buffer extends at least to the next multiple of
    /// 16 bytes). The offset must be a multiple of [`GpuEngine::offset_alignment`] and 16.
    pub out: Operand<'a>,
    /// f32, f16 or bf16 (round to nearest even, like the dequantiser).
    pub dtype: DType,
}

/// ggml's `MUL_MAT_ID` for [`GpuEngine::record_matvec_id`]: for token `t` and slot `s`,
/// `y[t, s] = W[ids[t, s]] · x[row]`, `row = t * slots + s` when `x_per_slot`, else `t`.
#[derive(Clone, Copy, Debug)]
pub struct MatVecIdJob<'a> {
    /// The experts' weights, `[K, N, E]`.
    pub weight: &'a ResidentTensor,
    /// `tokens × K` f32 values, or `tokens × slots × K` when `x_per_slot`.
    pub x: Operand<'a>,
    /// `tokens × slots` u32 expert indices; an index ≥ E gives NaN outputs.
    pub ids: Operand<'a>,
    /// `tokens × slots × N` f32 values (written).
    pub y: Operand<'a>,
    /// Tokens.
    pub tokens: u32,
    /// Experts used per token.
    pub slots: u32,
    /// Whether x has one row per (token, slot) rather than one per token.
    pub x_per_slot: bool,
}

/// One kernel call on a caller's buffers, of any [`Op`]: what a step of an engine is a list of.
#[derive(Clone, Copy, Debug)]
pub enum Job<'a> {
    /// [`Op::GetRows`].
    GetRows(GetRowsJob<'a>),
    /// [`Op::MatVec`].
    MatVec(MulMatJob<'a>),
    /// [`Op::MatMul`].
    MatMul(MulMatJob<'a>),
    /// [`Op::MatVecId`].
    MatVecId(MatVecIdJob<'a>),
}

impl Job<'_> {
    /// The kernel.
    pub const fn op(&self) -> Op {
        match self {
            Job::GetRows(_) => Op::GetRows,
            Job::MatVec(_) => Op::MatVec,
            Job::MatMul(_) => Op::MatMul,
            Job::MatVecId(_) => Op::MatVecId,
        }
    }
}

impl Recorder {
    /// Records `job` with the kernel it names.
    pub fn job(&mut self, pass: &mut wgpu::ComputePass<'_>, job: &Job<'_>) -> Result<()> {
        match job {
            Job::GetRows(j) => self.get_rows(pass, j),
            Job::MatVec(j) => self.matvec(pass, j),
            Job::MatMul(j) => self.matmul(pass, j),
            Job::MatVecId(j) => self.matvec_id(pass, j),
        }
    }
}

impl GpuEngine {
    /// A recorder for this engine's kernels, to keep from step to step ([`Recorder`]).
    pub fn recorder(&self) -> Recorder {
        Recorder::new(self.kernels.clone())
    }

    /// Compiles an engine's own kernel (`wgsl`'s `entry` point) on the terms of ours, for
    /// [`Recorder::dispatch`]: group 0 holds `bindings` (binding number, kind), group 1 binding 0
    /// its uniform parameters (see [`Program`]). Inside error scopes: a shader that does not
    /// compile is an error naming `label`.
    pub fn program(
        &self,
        label: &str,
        wgsl: &str,
        entry: &str,
        bindings: &[(u32, BindingKind)],
    ) -> Result<Program> {
        Program::new(&self.kernels, label, wgsl, entry, bindings)
    }

    /// Compiles (once) the kernel of `key`, so that shader problems surface early and later
    /// recordings do not pay for it.
    pub fn prepare_kernel(&self, key: &KernelKey) -> Result<()> {
        self.kernels.pipeline(key)?;
        self.check_device()
    }

    /// The choices this engine's matvec and matvec_id kernels are made with
    /// ([`crate::gpu::EngineOptions::matvec`] on this device): the default mapping, threads per
    /// row, the subgroups the kernels may use, unrolling.
    pub fn matvec_policy(&self) -> super::MatVecPolicy {
        self.kernels.plan.matvec
    }

    /// The precision the engine's products were asked to sum in
    /// ([`crate::gpu::EngineOptions::precision`]); each call gets it where a kernel honours it,
    /// else `exact` ([`GpuEngine::precision_for`]).
    pub fn precision(&self) -> super::Precision {
        self.kernels.plan.precision
    }

    /// The precision a call of `op` on a weight of `format` with `k` values per row sums in
    /// on this engine: [`GpuEngine::precision`] where a kernel honours it
    /// ([`super::Precision::honoured`]; matmul only where it runs as matvecs, on adapters with
    /// one invocation per row), else `exact`. The bound its results hold is that of
    /// [`crate::ops::reference_in`] in this mode.
    pub fn precision_for(&self, op: Op, format: Format, k: u64) -> super::Precision {
        match op {
            Op::MatMul if self.matvec_policy().threads > 1 => super::Precision::Exact,
            _ => self.precision().honoured(op, format, k),
        }
    }

    /// The kernels one call of `op` on `w` runs on this engine, in order, each once, as the
    /// recorder plans it (the policy, the tuner's choice and the precision honoured): `batch`
    /// columns of X (matvec, matmul; matvec in calls of up to
    /// [`MATVEC_MAX_BATCH`](super::MATVEC_MAX_BATCH), as [`GpuEngine::matvec`] makes them), ids
    /// gathered into f32 (get_rows), or tokens of one expert slot each (matvec_id), every
    /// operand a buffer of its own. Their names ([`KernelKey`]'s
    /// `Display`, e.g. `matvec.Q4_K.c1.t32.u4.vx.sg`) are the variant `bench`, `verify` and
    /// `apply` report per call. Errors: a call the kernels refuse.
    pub fn kernels_for(&self, op: Op, w: &ResidentTensor, batch: u64) -> Result<Vec<KernelKey>> {
        let set = &self.kernels;
        let weight = w.layout();
        let s = Shape::of(&weight)?;
        let bytes = |values: u64| Extent {
            offset: 0,
            len: values.saturating_mul(4).next_multiple_of(16),
        };
        let mut keys: Vec<KernelKey> = Vec::new();
        match op {
            Op::MatVec | Op::MatMul => {
                // matvec: in calls of up to 8 columns, as GpuEngine::matvec makes them.
                let (per_call, mul) = match op {
                    Op::MatVec => (MATVEC_MAX_BATCH as u64, MulOp::MatVec(None)),
                    _ => (batch, MulOp::MatMul),
                };
                let mut left = batch;
                loop {
                    let cols = left.min(per_call);
                    let call = MulCall {
                        weight: weight.clone(),
                        batch: cols,
                        x: bytes(cols.saturating_mul(s.k)),
                        y: bytes(cols.saturating_mul(s.rows)),
                        op: mul,
                    };
                    // A call the kernels refuse (no columns, too many) is the plan's error.
                    let plan = plan_mul(&set.plan, &call, &|key| set.mapping(key))?;
                    for g in plan.groups {
                        if !keys.contains(&g.key) {
                            keys.push(g.key);
                        }
                    }
                    left -= cols;
                    if left == 0 {
                        return Ok(keys);
                    }
                }
            }
            Op::GetRows => {
                let call = GetRowsCall {
                    weight,
                    dtype: DType::F32,
                    n_ids: batch,
                    ids: bytes(batch),
                    out: bytes(batch.saturating_mul(s.k)),
                };
                keys.push(plan_get_rows(&set.plan, &call)?.key);
            }
            Op::MatVecId => {
                let n = w.dims.get(1).copied().unwrap_or(1);
                let call = MatVecIdCall {
                    weight,
                    tokens: batch,
                    slots: 1,
                    x_per_slot: false,
                    x: bytes(batch.saturating_mul(s.k)),
                    ids: bytes(batch),
                    y: bytes(batch.saturating_mul(n)),
                };
                keys.push(plan_matvec_id(&set.plan, &call)?.key);
            }
        }
        Ok(keys)
    }

    /// Weight rows and X columns one pass of [`GpuEngine::record_matmul`] covers: the tiled
    /// kernel's 32 × 32 output tile, or on CPU adapters (one invocation per row) 64 rows of a
    /// workgroup by [`MATMUL_CPU_COLUMNS`]. The weight is read `ceil(batch / columns)` times and
    /// X `ceil(N / rows)` times.
    pub fn matmul_tile(&self) -> (u32, u32) {
        if self.matvec_policy().threads == 1 {
            (super::WORKGROUP_SIZE, MATMUL_CPU_COLUMNS)
        } else {
            (MATMUL_TILE, MATMUL_TILE)
        }
    }

    /// Records with a recorder of its own into one compute pass of `encoder`, then finishes it.
    fn record_once(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        what: impl FnOnce(&mut Recorder, &mut wgpu::ComputePass<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut recorder = self.recorder();
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("gguf-dequant kernel"),
                timestamp_writes: None,
            });
            what(&mut recorder, &mut pass)?;
        }
        recorder.finish();
        self.check_device()
    }

    /// Records `job` with a recorder of its own ([`Recorder::job`]).
    pub fn record_job(&self, encoder: &mut wgpu::CommandEncoder, job: &Job<'_>) -> Result<()> {
        self.record_once(encoder, |r, pass| r.job(pass, job))
    }

    /// Wgpu objects the kernel layer has created on this device so far, by every recorder
    /// (the one-line calls' and `record_*`'s own included): bind groups, uniform buffers,
    /// layouts and pipelines. The difference of two readings is what the calls between them
    /// created.
    pub fn kernel_objects_created(&self) -> u64 {
        self.kernels.created.total()
    }

    /// Records `Y = W X` for 1 to [`MATVEC_MAX_BATCH`] columns ([`Recorder::matvec`]).
    pub fn record_matvec(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &MulMatJob<'_>,
    ) -> Result<()> {
        self.record_once(encoder, |r, pass| r.matvec(pass, job))
    }

    /// Records `Y = W X` for any number of columns ([`Recorder::matmul`]).
    pub fn record_matmul(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &MulMatJob<'_>,
    ) -> Result<()> {
        self.record_once(encoder, |r, pass| r.matmul(pass, job))
    }

    /// Records a row gather ([`Recorder::get_rows`]).
    pub fn record_get_rows(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &GetRowsJob<'_>,
    ) -> Result<()> {
        self.record_once(encoder, |r, pass| r.get_rows(pass, job))
    }

    /// Records ggml's `MUL_MAT_ID` ([`Recorder::matvec_id`]).
    pub fn record_matvec_id(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &MatVecIdJob<'_>,
    ) -> Result<()> {
        self.record_once(encoder, |r, pass| r.matvec_id(pass, job))
    }

    /// Submits `encoder` after a copy of `len` bytes of `out` to a read-back buffer and returns them.
    fn finish_and_read(
        &self,
        mut encoder: wgpu::CommandEncoder,
        out: &wgpu::Buffer,
        staging: &wgpu::Buffer,
        len: usize,
    ) -> Result<Vec<u8>> {
        encoder.copy_buffer_to_buffer(out, 0, staging, 0, out.size());
        let index = self.submit("submitting a kernel", encoder)?;
        let mut bytes = vec![0u8; out.size() as usize];
        self.read_into(staging, index, &mut bytes)?;
        bytes.truncate(len);
        Ok(bytes)
    }

    pub(crate) fn encoder(&self) -> wgpu::CommandEncoder {
        self.device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gguf-dequant kernel"),
            })
    }

    /// [`GpuEngine::matvec`] on `mapping` (`None`: the policy's choice).
    pub(crate) fn run_mul_mapped(
        &self,
        w: &ResidentTensor,
        x: &[f32],
        batch: usize,
        mapping: Option<super::Mapping>,
    ) -> Result<Vec<f32>> {
        self.run_mul(w, x, batch, false, mapping)
    }

    fn run_mul(
        &self,
        w: &ResidentTensor,
        x: &[f32],
        batch: usize,
        tiled: bool,
        mapping: Option<super::Mapping>,
    ) -> Result<Vec<f32>> {
        let s = shape(w)?;
        if batch == 0 || x.len() as u64 != batch as u64 * s.k {
            return Err(invalid(format!(
                "x has {} values, not batch {batch} × K {}",
                x.len(),
                s.k
            )));
        }
        let batch32 =
            u32::try_from(batch).map_err(|_| invalid(format!("batch {batch} is too large")))?;
        let len = batch as u64 * s.rows * 4;
        let xb = buffers::upload(self.device(), "gguf-dequant x", bytemuck::cast_slice(x))?;
        let (yb, staging) = buffers::output_and_readback(
            self.device(),
            "gguf-dequant y",
            len.next_multiple_of(16),
        )?;
        let mut enc = self.encoder();
        let job = MulMatJob {
            weight: w,
            x: Operand::whole(&xb),
            y: Operand::whole(&yb),
            batch: batch32,
        };
        self.record_once(&mut enc, |r, pass| {
            if tiled {
                return r.matmul(pass, &job);
            }
            // Groups of up to 8 columns, as an engine would.
            let mut c0 = 0u32;
            while c0 < batch32 {
                let cols = MATVEC_MAX_BATCH.min(batch32 - c0);
                let part = MulMatJob {
                    x: Operand {
                        buffer: &xb,
                        offset: c0 as u64 * s.k * 4,
                    },
                    y: Operand {
                        buffer: &yb,
                        offset: c0 as u64 * s.rows * 4,
                    },
                    batch: cols,
                    ..job
                };
                match mapping {
                    Some(m) => r.matvec_mapped(pass, &part, m)?,
                    None => r.matvec(pass, &part)?,
                }
                c0 += cols;
            }
            Ok(())
        })?;
        let bytes = self.finish_and_read(enc, &yb, &staging, len as usize)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// `op` on `w` with `input` (of the kind [`Op::inputs`] says), through the one-line call of
    /// that kernel: f32 values (get_rows: the rows as f32).
    pub fn run(&self, op: Op, w: &ResidentTensor, input: &Input<'_>) -> Result<Vec<f32>> {
        match (op, *input) {
            (Op::GetRows, Input::Ids(ids)) => self.get_rows(w, ids),
            (Op::MatVec, Input::X { x, batch }) => self.matvec(w, x, batch),
            (Op::MatMul, Input::X { x, batch }) => self.matmul(w, x, batch),
            (
                Op::MatVecId,
                Input::XIds {
                    x,
                    ids,
                    slots,
                    x_per_slot,
                },
            ) => self.matvec_id(w, x, ids, slots, x_per_slot),
            (op, input) => Err(invalid(format!(
                "{op} takes {:?} inputs, not {:?}",
                op.inputs(),
                input.kind()
            ))),
        }
    }

    /// `Y = W X` with the matvec kernel (`x`: `batch × K`, row-major; any batch, in groups of 8
    /// columns). Returns `batch × N` values.
    pub fn matvec(&self, w: &ResidentTensor, x: &[f32], batch: usize) -> Result<Vec<f32>> {
        self.run_mul(w, x, batch, false, None)
    }

    /// `Y = W X` with the tiled matmul kernel. Returns `batch × N` values.
    pub fn matmul(&self, w: &ResidentTensor, x: &[f32], batch: usize) -> Result<Vec<f32>> {
        self.run_mul(w, x, batch, true, None)
    }

    /// Rows `ids` of `w` as f32 values (`ids.len() × K`).
    pub fn get_rows(&self, w: &ResidentTensor, ids: &[u32]) -> Result<Vec<f32>> {
        Ok(bytemuck::pod_collect_to_vec(&self.get_rows_as(
            w,
            ids,
            DType::F32,
        )?))
    }

    /// Rows `ids` of `w` as little-endian `dtype` bytes (`ids.len() × K` values).
    pub fn get_rows_as(&self, w: &ResidentTensor, ids: &[u32], dtype: DType) -> Result<Vec<u8>> {
        let s = shape(w)?;
        if let Some((i, &id)) = ids.iter().enumerate().find(|(_, &id)| id as u64 >= s.rows) {
            return Err(invalid(format!(
                "id {id} at position {i} is past the {} rows of {}",
                s.rows, w.name
            )));
        }
        let n_ids = u32::try_from(ids.len()).map_err(|_| invalid("too many ids".into()))?;
        let len = ids.len() as u64 * s.k * dtype.size() as u64;
        if n_ids == 0 {
            return Ok(Vec::new());
        }
        let ib = buffers::upload(self.device(), "gguf-dequant ids", bytemuck::cast_slice(ids))?;
        let (out, staging) = buffers::output_and_readback(
            self.device(),
            "gguf-dequant rows",
            len.next_multiple_of(16),
        )?;
        let mut enc = self.encoder();
        self.record_get_rows(
            &mut enc,
            &GetRowsJob {
                weight: w,
                ids: Operand::whole(&ib),
                n_ids,
                out: Operand::whole(&out),
                dtype,
            },
        )?;
        self.finish_and_read(enc, &out, &staging, len as usize)
    }

    /// ggml's `MUL_MAT_ID` (see [`MatVecIdJob`]): `ids` is `tokens × slots`, `x` `tokens × K` (or
    /// `tokens × slots × K` when `x_per_slot`). Returns `tokens × slots × N` values.
    pub fn matvec_id(
        &self,
        w: &ResidentTensor,
        x: &[f32],
        ids: &[u32],
        slots: usize,
        x_per_slot: bool,
    ) -> Result<Vec<f32>> {
        let s = shape(w)?;
        let n = w.dims.get(1).copied().unwrap_or(1);
        let experts = s.rows / n.max(1);
        if slots == 0 || !ids.len().is_multiple_of(slots) {
            return Err(invalid(format!(
                "{} ids are not tokens × {slots} slots",
                ids.len()
            )));
        }
        let tokens = ids.len() / slots;
        let x_rows = if x_per_slot { ids.len() } else { tokens };
        if x.len() as u64 != x_rows as u64 * s.k {
            return Err(invalid(format!(
                "x has {} values, not {x_rows} rows × K {}",
                x.len(),
                s.k
            )));
        }
        if let Some((i, &id)) = ids.iter().enumerate().find(|(_, &id)| id as u64 >= experts) {
            return Err(invalid(format!(
                "expert id {id} at position {i} is past the {experts} experts of {}",
                w.name
            )));
        }
        let to32 = |v: usize| u32::try_from(v).map_err(|_| invalid(format!("{v} is too large")));
        let len = ids.len() as u64 * n * 4;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let xb = buffers::upload(self.device(), "gguf-dequant x", bytemuck::cast_slice(x))?;
        let ib = buffers::upload(self.device(), "gguf-dequant ids", bytemuck::cast_slice(ids))?;
        let (yb, staging) = buffers::output_and_readback(
            self.device(),
            "gguf-dequant y",
            len.next_multiple_of(16),
        )?;
        let mut enc = self.encoder();
        self.record_matvec_id(
            &mut enc,
            &MatVecIdJob {
                weight: w,
                x: Operand::whole(&xb),
                ids: Operand::whole(&ib),
                y: Operand::whole(&yb),
                tokens: to32(tokens)?,
                slots: to32(slots)?,
                x_per_slot,
            },
        )?;
        let bytes = self.finish_and_read(enc, &yb, &staging, len as usize)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}

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
//! Every kernel is recorded into the caller's encoder (`record_*`, on [`ResidentTensor`]s, also
//! split ones or ones larger than a storage binding: each dispatch binds one run of whole rows)
//! or run in one call (`matvec`, `matmul`, `get_rows`, `matvec_id`). A tensor the loader made
//! resident dequantised (f32, f16, bf16) is multiplied as a weight of that format. Dims past the
//! second are folded into rows (a `[K, N, E]` weight is `N · E` rows of `K`; ggml's `MUL_MAT`
//! would instead broadcast E separate products), except in `matvec_id`, which reads them as
//! experts.
//!
//! Out-of-range row and expert ids: the one-line calls refuse them with an error naming the id
//! and its position; the recorded kernels, whose ids live in a GPU buffer, write NaN for them.

use std::sync::Arc;

use super::decode::{decode_prefixed, DecodeNames};
use super::loader::ResidentTensor;
use super::pipelines::{compile, PipelineCache};
use super::{buffers, scoped, windows, GpuEngine, GpuError};
use crate::{DType, Error, Format, Result};

/// Columns one `matvec` dispatch takes at most.
pub const MATVEC_MAX_BATCH: u32 = 8;
/// Columns one matvec dispatch of [`GpuEngine::record_matmul`] takes on CPU adapters.
pub const MATMUL_CPU_COLUMNS: u32 = 16;
/// Rows and columns of one `matmul` workgroup's output tile.
const MATMUL_TILE: u64 = 32;

/// The kernels, by entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Row gather into `DType` values.
    GetRows(DType),
    /// `y = W x` for this many columns (1..=8).
    MatVec(u32),
    /// Tiled `Y = W X`.
    MatMul,
    /// Expert-indexed matvec.
    MatVecId,
}

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

/// A compiled kernel: the kernel, the weight format, invocations per matvec row and whether x is
/// read as vec4.
type KernelKey = (Kernel, Format, u32, bool);

/// The compiled kernels of one engine.
pub(crate) type KernelPipelines = PipelineCache<KernelKey>;

/// The WGSL of a kernel for weights of `format`: the format's decode module (prefix `w_`, blocks
/// in `w`, grids in `grids` at binding 4), the row helpers and the kernel; matvec kernels with
/// `threads` invocations per row, reading x as vec4 when `vec_x`.
pub(crate) fn kernel_source((kernel, format, threads, vec_x): KernelKey) -> Result<String> {
    macro_rules! file {
        ($dir:literal, $name:literal) => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/shaders/",
                $dir,
                "/",
                $name,
                ".wgsl"
            ))
        };
    }
    let mut decoder = String::new();
    if let Kernel::GetRows(dtype) = kernel {
        decoder.push_str(match dtype {
            DType::F32 => file!("lib", "out_f32"),
            DType::F16 => concat!(file!("lib", "out_f16"), file!("lib", "store_pairs")),
            DType::BF16 => concat!(file!("lib", "out_bf16"), file!("lib", "store_pairs")),
        });
    }
    let names = DecodeNames {
        prefix: "w_",
        blocks: "w",
        grids: "grids",
    };
    let module = decode_prefixed(format, &decoder, &names)?;
    let (header, body) = match kernel {
        Kernel::GetRows(_) => (String::new(), file!("kernels", "get_rows")),
        Kernel::MatVec(b) => (
            format!("const B: u32 = {b}u;\nconst T: u32 = {threads}u;\n"),
            file!("kernels", "matvec"),
        ),
        Kernel::MatVecId => (
            format!("const B: u32 = 1u;\nconst T: u32 = {threads}u;\n"),
            file!("kernels", "matvec"),
        ),
        Kernel::MatMul => (String::new(), file!("kernels", "matmul")),
    };
    let grids = if format.binds_grids() {
        "@group(0) @binding(4) var<storage, read> grids: array<u32>;\n"
    } else {
        ""
    };
    let x8 = match (kernel, vec_x) {
        (Kernel::MatVec(_) | Kernel::MatVecId, true) => file!("kernels", "x_vec4"),
        (Kernel::MatVec(_) | Kernel::MatVecId, false) => file!("kernels", "x_scalar"),
        _ => "",
    };
    Ok(format!(
        "{header}{grids}{module}\n{}\n{x8}\n{body}",
        file!("kernels", "rows")
    ))
}

impl Kernel {
    fn entry_point(self) -> &'static str {
        match self {
            Kernel::GetRows(_) => "get_rows",
            Kernel::MatVec(_) => "matvec",
            Kernel::MatMul => "matmul",
            Kernel::MatVecId => "matvec_id",
        }
    }
}

/// The format the kernels decode a resident tensor as: its own, or its resident dtype's.
fn weight_format(t: &ResidentTensor) -> Format {
    match t.dtype {
        None => t.format,
        Some(DType::F32) => Format::F32,
        Some(DType::F16) => Format::F16,
        Some(DType::BF16) => Format::BF16,
    }
}

/// One dispatch's run of whole weight rows inside one binding.
struct RowRun<'a> {
    buffer: &'a wgpu::Buffer,
    offset: u64,
    size: u64,
    /// Bytes from the binding's start to row `first`.
    skip: u64,
    first: u64,
    count: u64,
}

/// A weight's shape as the kernels see it.
struct Shape {
    format: Format,
    k: u64,
    rows: u64,
    row_bytes: u64,
}

fn invalid(m: String) -> Error {
    GpuError::InvalidJob(m).into()
}

fn shape(t: &ResidentTensor) -> Result<Shape> {
    let format = weight_format(t);
    let k = t.dims.first().copied().unwrap_or(0);
    if !format.has_shader() {
        return Err(invalid(format!(
            "{}: {format} has no shader (multiply it on the CPU with ops)",
            t.name
        )));
    }
    if k == 0 || t.n_elements == 0 || !t.n_elements.is_multiple_of(k) {
        return Err(invalid(format!(
            "{}: dims {:?} are not rows of K values",
            t.name, t.dims
        )));
    }
    let elems = format.block_elems() as u64;
    if !k.is_multiple_of(elems) {
        return Err(invalid(format!(
            "{}: K = {k} is not a multiple of the {elems}-value {format} block",
            t.name
        )));
    }
    let row_bytes = k / elems * format.block_bytes() as u64;
    if k > u32::MAX as u64 / 8 || row_bytes > u32::MAX as u64 {
        return Err(invalid(format!(
            "{}: rows of {k} values are too long",
            t.name
        )));
    }
    Ok(Shape {
        format,
        k,
        rows: t.n_elements / k,
        row_bytes,
    })
}

/// A checked f32/u32 span: `count` 4-byte elements of `op` bound from an aligned offset; returns
/// (offset, size, skip in elements).
fn span(
    op: &Operand<'_>,
    first: u64,
    count: u64,
    align: u64,
    what: &str,
) -> Result<(u64, u64, u32)> {
    if !op.offset.is_multiple_of(4) {
        return Err(invalid(format!(
            "{what}: offset {} is not a multiple of 4",
            op.offset
        )));
    }
    if !op.buffer.usage().contains(wgpu::BufferUsages::STORAGE) {
        return Err(invalid(format!("{what}: the buffer needs usage STORAGE")));
    }
    let start = op.offset + first * 4;
    let end = start + count * 4;
    if end > op.buffer.size() {
        return Err(invalid(format!(
            "{what}: {count} values from byte {start} pass the buffer's {} bytes",
            op.buffer.size()
        )));
    }
    let offset = start / align * align;
    Ok((offset, end - offset, ((start - offset) / 4) as u32))
}

fn binding(buffer: &wgpu::Buffer, offset: u64, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer,
        offset,
        size: wgpu::BufferSize::new(size),
    })
}

impl GpuEngine {
    /// The pipeline of `key`, compiled on first use.
    fn kernel_pipeline(&self, key: KernelKey) -> Result<Arc<wgpu::ComputePipeline>> {
        let (kernel, format, _, _) = key;
        self.kernels.get_or_compile(key, || {
            let label = format!("gguf-dequant {kernel:?} on {format}");
            Ok(compile(
                &self.device,
                &label,
                &kernel_source(key)?,
                None,
                kernel.entry_point(),
            )?)
        })
    }

    /// Compiles (once) `kernel` for weights of `format`, so that shader problems surface early.
    pub fn prepare_kernel(&self, kernel: Kernel, format: Format) -> Result<()> {
        self.kernel_pipeline((kernel, format, self.matvec_threads(), true))?;
        Ok(self.check()?)
    }

    /// Invocations per matvec row: [`super::EngineOptions::matvec_threads_per_row`], else 1 on CPU
    /// adapters (llvmpipe, SwiftShader), where every barrier costs, and 64 elsewhere.
    pub fn matvec_threads(&self) -> u32 {
        self.options.matvec_threads_per_row.unwrap_or(
            if self.info.device_type == wgpu::DeviceType::Cpu {
                1
            } else {
                64
            },
        )
    }

    /// Weight rows and X columns one pass of [`GpuEngine::record_matmul`] covers: the tiled
    /// kernel's 32 × 32 output tile, or on CPU adapters (one invocation per row) 64 rows of a
    /// workgroup by [`MATMUL_CPU_COLUMNS`]. The weight is read `ceil(batch / columns)` times and
    /// X `ceil(N / rows)` times.
    pub fn matmul_tile(&self) -> (u32, u32) {
        if self.matvec_threads() == 1 {
            (64, MATMUL_CPU_COLUMNS)
        } else {
            (MATMUL_TILE as u32, MATMUL_TILE as u32)
        }
    }

    fn max_dim(&self) -> u64 {
        let device_dim = self.limits.max_compute_workgroups_per_dimension;
        self.options
            .max_workgroups_per_dim
            .map_or(device_dim, |m| m.clamp(1, device_dim)) as u64
    }

    /// The runs of whole rows of `t`, each inside one binding of at most `max_binding` bytes and
    /// at most `max_rows` rows.
    fn row_runs<'t>(
        &self,
        t: &'t ResidentTensor,
        s: &Shape,
        max_rows: u64,
    ) -> Result<Vec<RowRun<'t>>> {
        let align = self.offset_alignment();
        let fit = self.max_binding_size().saturating_sub(align + 4) / s.row_bytes;
        if fit == 0 {
            return Err(GpuError::TooLarge {
                what: format!(
                    "one row of {} ({} bytes) in a storage binding",
                    t.name, s.row_bytes
                ),
                bytes: s.row_bytes + align,
                limit: self.max_binding_size(),
            }
            .into());
        }
        let per = fit.min(max_rows).max(1);
        let mut runs = Vec::new();
        for p in &t.parts {
            let (first, end) = (p.elements.start / s.k, p.elements.end.div_ceil(s.k));
            if !p.elements.start.is_multiple_of(s.k)
                || (!p.elements.end.is_multiple_of(s.k) && p.elements.end != t.n_elements)
            {
                return Err(invalid(format!(
                    "{}: a buffer boundary at element {} splits a row of {} values",
                    t.name, p.elements.start, s.k
                )));
            }
            let mut r = first;
            while r < end {
                let n = per.min(end - r);
                let b = t.bind_elements(r * s.k..(r + n) * s.k, align)?;
                runs.push(RowRun {
                    buffer: b.buffer,
                    offset: b.offset,
                    size: b.size,
                    skip: b.skip_bytes,
                    first: r,
                    count: n,
                });
                r += n;
            }
        }
        Ok(runs)
    }

    fn dispatch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        pipeline: &wgpu::ComputePipeline,
        entries: &[(u32, wgpu::BindingResource<'_>)],
        params: &[u32],
        groups: (u32, u32, u32),
    ) -> Result<(), GpuError> {
        // Every kernel's `Params` is at most 16 u32.
        let mut words = params.to_vec();
        words.resize(16, 0);
        let uniform = buffers::upload_as(
            &self.device,
            "gguf-dequant kernel params",
            bytemuck::cast_slice(&words),
            wgpu::BufferUsages::UNIFORM,
        )?;
        let layout = pipeline.get_bind_group_layout(0);
        let mut all: Vec<wgpu::BindGroupEntry<'_>> = entries
            .iter()
            .map(|(binding, resource)| wgpu::BindGroupEntry {
                binding: *binding,
                resource: resource.clone(),
            })
            .collect();
        all.push(wgpu::BindGroupEntry {
            binding: 3,
            resource: uniform.as_entire_binding(),
        });
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("gguf-dequant kernel"),
            layout: &layout,
            entries: &all,
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("gguf-dequant kernel"),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        Ok(())
    }

    /// The grids binding, for formats that read it.
    fn grids_entry(&self, format: Format) -> Option<(u32, wgpu::BindingResource<'_>)> {
        format
            .binds_grids()
            .then(|| (4, self.tables.as_entire_binding()))
    }

    /// Records `Y = W X` for 1 to [`MATVEC_MAX_BATCH`] columns: one workgroup per row.
    pub fn record_matvec(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &MulMatJob<'_>,
    ) -> Result<()> {
        if job.batch == 0 || job.batch > MATVEC_MAX_BATCH {
            return Err(invalid(format!(
                "matvec takes 1 to {MATVEC_MAX_BATCH} columns, not {} (use matmul)",
                job.batch
            )));
        }
        self.record_mul(encoder, job, false, MATVEC_MAX_BATCH as u64)
    }

    /// Records `Y = W X` for any number of columns: tiled through workgroup memory, or on CPU
    /// adapters (where [`GpuEngine::matvec_threads`] is 1) as matvecs of up to
    /// [`MATMUL_CPU_COLUMNS`] columns, one invocation per row decoding each chunk once for all of
    /// them (measured faster there: no barriers, no workgroup-memory round trip).
    pub fn record_matmul(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &MulMatJob<'_>,
    ) -> Result<()> {
        if job.batch == 0 {
            return Err(invalid("matmul needs at least one column".into()));
        }
        if self.matvec_threads() == 1 {
            self.record_mul(encoder, job, false, MATMUL_CPU_COLUMNS as u64)
        } else {
            self.record_mul(encoder, job, true, 0)
        }
    }

    fn record_mul(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &MulMatJob<'_>,
        tiled: bool,
        matvec_cols: u64,
    ) -> Result<()> {
        self.check()?;
        let t = job.weight;
        let s = shape(t)?;
        let align = self.offset_alignment();
        let batch = job.batch as u64;
        // Columns per dispatch: X and Y spans within a binding.
        let room = self.max_binding_size().saturating_sub(align);
        let per_cols = (room / (s.k * 4)).min(room / (s.rows * 4));
        let max_cols = if tiled {
            self.max_dim() * MATMUL_TILE
        } else {
            matvec_cols
        };
        let per_cols = per_cols.min(max_cols);
        if per_cols == 0 {
            return Err(GpuError::TooLarge {
                what: format!("one column of {} in a storage binding", t.name),
                bytes: s.k.max(s.rows) * 4 + align,
                limit: self.max_binding_size(),
            }
            .into());
        }
        span(&job.x, 0, batch * s.k, align, "x")?;
        span(&job.y, 0, batch * s.rows, align, "y")?;
        let max_rows = if tiled {
            self.max_dim() * MATMUL_TILE
        } else {
            self.max_dim() * self.max_dim()
        };
        let runs = self.row_runs(t, &s, max_rows)?;
        scoped(
            &self.device,
            &format!("recording a product with {}", t.name),
            || {
                let mut c0 = 0;
                while c0 < batch {
                    let cols = per_cols.min(batch - c0);
                    let kernel = if tiled {
                        Kernel::MatMul
                    } else {
                        Kernel::MatVec(cols as u32)
                    };
                    let (x_off, x_size, x_skip) = span(&job.x, c0 * s.k, cols * s.k, align, "x")?;
                    let vec_x = !tiled && s.k.is_multiple_of(4) && x_skip.is_multiple_of(4);
                    let pipeline =
                        self.kernel_pipeline((kernel, s.format, self.matvec_threads(), vec_x))?;
                    for run in &runs {
                        let y_first = c0 * s.rows + run.first;
                        let y_count = (cols - 1) * s.rows + run.count;
                        let (y_off, y_size, y_skip) = span(&job.y, y_first, y_count, align, "y")?;
                        let mut entries = vec![
                            (0, binding(run.buffer, run.offset, run.size)),
                            (1, binding(job.x.buffer, x_off, x_size)),
                            (2, binding(job.y.buffer, y_off, y_size)),
                        ];
                        entries.extend(self.grids_entry(s.format));
                        if vec_x {
                            entries.push((6, binding(job.x.buffer, x_off, x_size)));
                        }
                        let common = [
                            s.k as u32,
                            run.count as u32,
                            s.row_bytes as u32,
                            run.skip as u32,
                            x_skip,
                            y_skip,
                            s.rows as u32,
                        ];
                        if tiled {
                            let mut p = common.to_vec();
                            p.push(cols as u32);
                            let groups = (
                                run.count.div_ceil(MATMUL_TILE) as u32,
                                cols.div_ceil(MATMUL_TILE) as u32,
                                1,
                            );
                            self.dispatch(encoder, &pipeline, &entries, &p, groups)?;
                        } else {
                            let (gx, gy) = windows::grid(
                                run.count.div_ceil(64 / self.matvec_threads() as u64),
                                self.max_dim(),
                            );
                            self.dispatch(encoder, &pipeline, &entries, &common, (gx, gy, 1))?;
                        }
                    }
                    c0 += cols;
                }
                Ok::<_, Error>(())
            },
        )??;
        Ok(self.check()?)
    }

    /// Records a row gather: `out[i] = W[ids[i]]` as `dtype` values.
    pub fn record_get_rows(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &GetRowsJob<'_>,
    ) -> Result<()> {
        self.check()?;
        let t = job.weight;
        let s = shape(t)?;
        let align = self.offset_alignment();
        let size = job.dtype.size() as u64;
        let n_ids = job.n_ids as u64;
        if n_ids == 0 {
            return Ok(());
        }
        span(&job.ids, 0, n_ids, align, "ids")?;
        let out_align = align.max(windows::DST_ALIGN);
        if !job.out.offset.is_multiple_of(out_align) {
            return Err(invalid(format!(
                "get_rows output offset {} is not a multiple of {out_align}",
                job.out.offset
            )));
        }
        let row_out = s.k * size;
        let out_len = (n_ids * row_out).next_multiple_of(windows::DST_ALIGN);
        if job.out.offset + out_len > job.out.buffer.size() {
            return Err(invalid(format!(
                "get_rows output needs {out_len} bytes from {}, the buffer has {}",
                job.out.offset,
                job.out.buffer.size()
            )));
        }
        let runs = self.row_runs(t, &s, u64::MAX)?;
        if !s.k.is_multiple_of(8) && runs.len() > 1 {
            return Err(invalid(format!(
                "{}: rows of {} values (not a multiple of 8) are gathered from one binding only",
                t.name, s.k
            )));
        }
        // Ids per window: output windows start on aligned offsets and fit a binding, and their
        // 8-value groups fit the grid.
        let l = out_align.max(32);
        let step = l / windows::gcd(l, row_out);
        let room = self.max_binding_size().saturating_sub(64);
        let by_groups = self.max_dim() * self.max_dim() * 64 * 8 / s.k;
        let per = (room / row_out).min(by_groups).min(u32::MAX as u64 / s.k) / step * step;
        if per == 0 {
            return Err(GpuError::TooLarge {
                what: format!("{step} gathered rows of {} in a storage binding", t.name),
                bytes: step * row_out,
                limit: self.max_binding_size(),
            }
            .into());
        }
        let pipeline = self.kernel_pipeline((Kernel::GetRows(job.dtype), s.format, 1, false))?;
        scoped(
            &self.device,
            &format!("recording get_rows of {}", t.name),
            || {
                let mut i0 = 0;
                while i0 < n_ids {
                    let n = per.min(n_ids - i0);
                    let n_out = n * s.k;
                    let (ids_off, ids_size, ids_skip) = span(&job.ids, i0, n, align, "ids")?;
                    let out_off = job.out.offset + i0 * row_out;
                    let out_size = (n_out * size).next_multiple_of(windows::DST_ALIGN);
                    let groups = n_out.div_ceil(8 * 64);
                    let (gx, gy) = windows::grid(groups, self.max_dim());
                    for run in &runs {
                        let mut entries = vec![
                            (0, binding(run.buffer, run.offset, run.size)),
                            (2, binding(job.out.buffer, out_off, out_size)),
                            (5, binding(job.ids.buffer, ids_off, ids_size)),
                        ];
                        entries.extend(self.grids_entry(s.format));
                        let p = [
                            s.k as u32,
                            n_out as u32,
                            s.row_bytes as u32,
                            run.skip as u32,
                            run.first as u32,
                            run.count as u32,
                            s.rows.min(u32::MAX as u64) as u32,
                            ids_skip,
                        ];
                        self.dispatch(encoder, &pipeline, &entries, &p, (gx, gy, 1))?;
                    }
                    i0 += n;
                }
                Ok::<_, Error>(())
            },
        )??;
        Ok(self.check()?)
    }

    /// Records ggml's `MUL_MAT_ID` (see [`MatVecIdJob`]).
    pub fn record_matvec_id(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        job: &MatVecIdJob<'_>,
    ) -> Result<()> {
        self.check()?;
        let t = job.weight;
        let s = shape(t)?;
        let n = t.dims.get(1).copied().unwrap_or(1);
        let experts = s.rows / n.max(1);
        if n == 0 || experts * n != s.rows || experts > u32::MAX as u64 {
            return Err(invalid(format!(
                "{}: dims {:?} are not [K, N, E]",
                t.name, t.dims
            )));
        }
        if job.slots == 0 {
            return Err(invalid("matvec_id needs at least one slot".into()));
        }
        let pairs = job.tokens as u64 * job.slots as u64;
        if pairs == 0 {
            return Ok(());
        }
        let align = self.offset_alignment();
        let x_rows = if job.x_per_slot {
            pairs
        } else {
            job.tokens as u64
        };
        let (x_off, x_size, x_skip) = span(&job.x, 0, x_rows * s.k, align, "x")?;
        if x_size > self.max_binding_size() {
            return Err(GpuError::TooLarge {
                what: "matvec_id inputs in one storage binding".into(),
                bytes: x_size,
                limit: self.max_binding_size(),
            }
            .into());
        }
        span(&job.ids, 0, pairs, align, "ids")?;
        span(&job.y, 0, pairs * n, align, "y")?;
        let room = self.max_binding_size().saturating_sub(align);
        let per = (room / (n * 4)).min(self.max_dim());
        let threads = self.matvec_threads();
        if per == 0 || n.div_ceil(64 / threads as u64) > self.max_dim() * self.max_dim() {
            return Err(GpuError::TooLarge {
                what: format!("one expert's outputs of {} in a storage binding", t.name),
                bytes: n * 4,
                limit: self.max_binding_size(),
            }
            .into());
        }
        let runs = self.row_runs(t, &s, u64::MAX)?;
        let vec_x = s.k.is_multiple_of(4) && x_skip.is_multiple_of(4);
        let pipeline = self.kernel_pipeline((Kernel::MatVecId, s.format, threads, vec_x))?;
        let (gx, gy) = windows::grid(n.div_ceil(64 / threads as u64), self.max_dim());
        scoped(
            &self.device,
            &format!("recording matvec_id on {}", t.name),
            || {
                let mut p0 = 0;
                while p0 < pairs {
                    let np = per.min(pairs - p0);
                    let (ids_off, ids_size, ids_skip) = span(&job.ids, p0, np, align, "ids")?;
                    let (y_off, y_size, y_skip) = span(&job.y, p0 * n, np * n, align, "y")?;
                    for run in &runs {
                        let mut entries = vec![
                            (0, binding(run.buffer, run.offset, run.size)),
                            (1, binding(job.x.buffer, x_off, x_size)),
                            (2, binding(job.y.buffer, y_off, y_size)),
                            (5, binding(job.ids.buffer, ids_off, ids_size)),
                        ];
                        entries.extend(self.grids_entry(s.format));
                        if vec_x {
                            entries.push((6, binding(job.x.buffer, x_off, x_size)));
                        }
                        let p = [
                            s.k as u32,
                            n as u32,
                            s.row_bytes as u32,
                            run.skip as u32,
                            x_skip,
                            y_skip,
                            n as u32,
                            run.first as u32,
                            run.count as u32,
                            experts as u32,
                            job.slots,
                            u32::from(job.x_per_slot),
                            p0 as u32,
                            ids_skip,
                        ];
                        self.dispatch(encoder, &pipeline, &entries, &p, (gx, gy, np as u32))?;
                    }
                    p0 += np;
                }
                Ok::<_, Error>(())
            },
        )??;
        Ok(self.check()?)
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

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gguf-dequant kernel"),
            })
    }

    fn run_mul(
        &self,
        w: &ResidentTensor,
        x: &[f32],
        batch: usize,
        tiled: bool,
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
        let xb = buffers::upload(&self.device, "gguf-dequant x", bytemuck::cast_slice(x))?;
        let (yb, staging) =
            buffers::output_and_readback(&self.device, "gguf-dequant y", len.next_multiple_of(16))?;
        let mut enc = self.encoder();
        let job = MulMatJob {
            weight: w,
            x: Operand::whole(&xb),
            y: Operand::whole(&yb),
            batch: batch32,
        };
        if tiled {
            self.record_matmul(&mut enc, &job)?;
        } else {
            let mut c0 = 0u32;
            // Groups of up to 8 columns, as an engine would.
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
                self.record_matvec(&mut enc, &part)?;
                c0 += cols;
            }
        }
        let bytes = self.finish_and_read(enc, &yb, &staging, len as usize)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// `Y = W X` with the matvec kernel (`x`: `batch × K`, row-major; any batch, in groups of 8
    /// columns). Returns `batch × N` values.
    pub fn matvec(&self, w: &ResidentTensor, x: &[f32], batch: usize) -> Result<Vec<f32>> {
        self.run_mul(w, x, batch, false)
    }

    /// `Y = W X` with the tiled matmul kernel. Returns `batch × N` values.
    pub fn matmul(&self, w: &ResidentTensor, x: &[f32], batch: usize) -> Result<Vec<f32>> {
        self.run_mul(w, x, batch, true)
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
        let ib = buffers::upload(&self.device, "gguf-dequant ids", bytemuck::cast_slice(ids))?;
        let (out, staging) = buffers::output_and_readback(
            &self.device,
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
        let xb = buffers::upload(&self.device, "gguf-dequant x", bytemuck::cast_slice(x))?;
        let ib = buffers::upload(&self.device, "gguf-dequant ids", bytemuck::cast_slice(ids))?;
        let (yb, staging) =
            buffers::output_and_readback(&self.device, "gguf-dequant y", len.next_multiple_of(16))?;
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

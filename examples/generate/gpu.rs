//! The forward pass on the GPU, as an engine on wgpu runs it with gguf-dequant: the weights
//! resident raw (blocks untouched, `WeightLoader`), the embedding lookup (`get_rows`) and every
//! projection (`matmul` for a prompt, `matvec` for one token) straight on the raw blocks with the
//! library's kernels, and the engine's own kernels (`wgsl/*.wgsl`: RMSNorm, RoPE, attention over
//! the KV cache, the gated activation, residual adds, argmax) compiled as `Program`s. Everything of
//! one forward pass is recorded into one compute pass with one `Recorder` kept for the whole run,
//! so a decoding step, once warm, creates no wgpu object. f32 throughout (the KV cache too),
//! unless asked to have the activations as llama.cpp's CPU backend has them ([`Activations`]).

use std::sync::Arc;
use std::time::Instant;

use gguf_dequant::gpu::kernels::{
    BindingKind, GetRowsJob, MulMatJob, Operand, Program, Recorder, RecorderStats,
};
use gguf_dequant::gpu::loader::{
    LoadOptions, Residency, ResidentModel, ResidentTensor, WeightLoader,
};
use gguf_dequant::gpu::{buffers, GpuEngine};
use gguf_dequant::{DType, Format};

use crate::model::{Act, Model, ModelError, Rope};

/// The engine's own kernels.
struct Programs {
    rms_norm: Program,
    rope: Program,
    attention: Program,
    glu: Program,
    add: Program,
    scale: Program,
    copy_rows: Program,
    argmax: Program,
    ggml_cpu: Program,
}

fn ro() -> BindingKind {
    BindingKind::Storage { min_bytes: 4 }
}

fn rw() -> BindingKind {
    BindingKind::StorageReadWrite { min_bytes: 4 }
}

impl Programs {
    fn new(engine: &GpuEngine) -> Result<Programs, ModelError> {
        let p = |name: &str, src: &str, b: &[BindingKind]| {
            let bindings: Vec<(u32, BindingKind)> =
                b.iter().enumerate().map(|(i, &k)| (i as u32, k)).collect();
            engine.program(name, src, name, &bindings)
        };
        Ok(Programs {
            rms_norm: p(
                "rms_norm",
                include_str!("wgsl/rms_norm.wgsl"),
                &[ro(), ro(), rw()],
            )?,
            rope: p(
                "rope",
                include_str!("wgsl/rope.wgsl"),
                &[ro(), BindingKind::Storage { min_bytes: 8 }, rw()],
            )?,
            attention: p(
                "attention",
                include_str!("wgsl/attention.wgsl"),
                &[ro(), ro(), ro(), rw(), rw()],
            )?,
            glu: p("glu", include_str!("wgsl/glu.wgsl"), &[rw(), ro()])?,
            add: p("add", include_str!("wgsl/add.wgsl"), &[rw(), ro()])?,
            scale: p("scale", include_str!("wgsl/scale.wgsl"), &[rw()])?,
            copy_rows: p(
                "copy_rows",
                include_str!("wgsl/copy_rows.wgsl"),
                &[ro(), rw()],
            )?,
            argmax: p("argmax", include_str!("wgsl/argmax.wgsl"), &[ro(), rw()])?,
            ggml_cpu: p(
                "ggml_cpu",
                include_str!("wgsl/ggml_cpu.wgsl"),
                &[ro(), rw()],
            )?,
        })
    }
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct NormParams {
    rows: u32,
    d: u32,
    eps: f32,
    _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct RopeParams {
    tokens: u32,
    heads: u32,
    head_dim: u32,
    n_rot: u32,
    pos0: u32,
    dst_row0: u32,
    neox: u32,
    _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct AttnParams {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    pos0: u32,
    window: u32,
    s_stride: u32,
    scale: f32,
}

/// `n` and up to three more words: the params of the elementwise kernels.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Words {
    a: u32,
    b: u32,
    c: u32,
    d: u32,
}

/// What a projection's dot products see of its activations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activations {
    /// The f32 values as computed (exact arithmetic up to f32 rounding).
    #[default]
    F32,
    /// As llama.cpp's CPU backend has them: each projection's input quantised to its weight's
    /// `vec_dot_type` (Q8_0, Q8_1, Q8_K, f16, bf16: [`ggml_vec_dot`]) and the GELU through
    /// ggml's f16 table (`wgsl/ggml_cpu.wgsl`, `wgsl/glu.wgsl`). Not a speed path: it shows
    /// what that rounding costs against exact arithmetic, and that sharing it does not bring two
    /// f32 implementations together (the 8-bit rounding turns last-bit differences into
    /// different quants). One difference stays: Q8_1's block sum `s` is `f16(d·Σq)` there and
    /// `f16(d)·Σq` here.
    GgmlCpu,
}

/// The values in one block of each quantisation kind of [`ggml_vec_dot`].
pub const GGML_BLOCK: [u64; 4] = [32, 256, 1, 1];

/// The quantisation llama.cpp's CPU backend applies to the activations of a projection on
/// weights of `format` (`type_traits_cpu[format].vec_dot_type` in ggml-cpu.c), as the kind
/// `wgsl/ggml_cpu.wgsl` takes: 0 Q8_0 (and Q8_1, whose quants are Q8_0's), 1 Q8_K, 2 f16, 3 bf16;
/// `None` where it keeps f32 (F32 weights, and formats its CPU backend has no dot product for).
pub fn ggml_vec_dot(format: Format) -> Option<u32> {
    use Format::*;
    match format {
        Q1_0 | Q2_0 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1 | MXFP4 | NVFP4 | IQ4_NL => Some(0),
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ2_XXS | IQ2_XS | IQ3_XXS | IQ3_S | IQ2_S | IQ1_S
        | IQ1_M | IQ4_XS | TQ1_0 | TQ2_0 => Some(1),
        F16 => Some(2),
        BF16 => Some(3),
        _ => None,
    }
}

/// Which logits a forward pass writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Every position's (teacher forcing).
    All,
    /// The last position's (generation).
    Last,
}

/// The activations, sized for `max_batch` tokens.
struct Buffers {
    ids: wgpu::Buffer,
    x: wgpu::Buffer,
    xn: wgpu::Buffer,
    q: wgpu::Buffer,
    k: wgpu::Buffer,
    v: wgpu::Buffer,
    qn: wgpu::Buffer,
    kn: wgpu::Buffer,
    qr: wgpu::Buffer,
    att: wgpu::Buffer,
    o: wgpu::Buffer,
    gate: wgpu::Buffer,
    up: wgpu::Buffer,
    logits: wgpu::Buffer,
    scores: wgpu::Buffer,
    next: wgpu::Buffer,
    staging: wgpu::Buffer,
}

/// A model on the GPU with its KV cache and the recorder of the run.
pub struct Gpu {
    pub engine: Arc<GpuEngine>,
    weights: ResidentModel,
    hp: crate::model::Hparams,
    programs: Programs,
    recorder: Recorder,
    b: Buffers,
    /// Per layer: the K and V cache, `ctx` rows of `kv_dim` values.
    kv: Vec<(wgpu::Buffer, wgpu::Buffer)>,
    /// cos/sin tables by RoPE base.
    rope: Vec<(f32, wgpu::Buffer)>,
    max_batch: usize,
    ctx: usize,
    /// Seconds the load took.
    pub load_seconds: f64,
    /// GPU timestamps between dispatches, when asked for ([`Gpu::profile`]).
    profiler: Option<Profiler>,
    activations: Activations,
    /// A projection's quantised input under [`Activations::GgmlCpu`].
    xq: Option<wgpu::Buffer>,
}

/// GPU timestamps written between the dispatches of a forward pass (`TIMESTAMP_QUERY_INSIDE_PASSES`),
/// each span named by what it ran, and the CPU time spent recording.
struct Profiler {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    /// The name of the span that ends at each mark after the first.
    labels: Vec<&'static str>,
    period_ns: f64,
    submitted: Option<wgpu::SubmissionIndex>,
    record_seconds: f64,
}

const MAX_MARKS: u32 = 4096;

/// Where one forward pass's time went: GPU seconds by kind of dispatch, and CPU seconds spent
/// recording it.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub gpu: Vec<(&'static str, f64)>,
    pub record_seconds: f64,
}

fn storage(engine: &GpuEngine, label: &str, bytes: u64) -> Result<wgpu::Buffer, ModelError> {
    Ok(buffers::upload_sized(
        engine.device(),
        label,
        &[],
        bytes.max(16),
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
    )?)
}

/// The cos/sin of every position below `ctx` and rotated pair of `hp`'s heads for `base`,
/// computed in f64 and rounded to f32: `[pos][pair] = (cos, sin)`.
pub fn rope_table(n_rot: usize, base: f32, ctx: usize) -> Vec<f64> {
    let half = n_rot / 2;
    let mut out = Vec::with_capacity(ctx * half * 2);
    for p in 0..ctx {
        for i in 0..half {
            let theta = p as f64 * (base as f64).powf(-2.0 * i as f64 / n_rot as f64);
            out.push(theta.cos());
            out.push(theta.sin());
        }
    }
    out
}

impl Gpu {
    /// Loads `model`'s weights raw onto `engine`'s device, compiles the engine's kernels, and
    /// allocates activations for `max_batch` tokens at a time and a KV cache of `ctx` positions.
    pub fn new(
        engine: Arc<GpuEngine>,
        model: &Model,
        max_batch: usize,
        ctx: usize,
    ) -> Result<Gpu, ModelError> {
        let hp = model.hp.clone();
        if ctx > hp.n_ctx {
            return Err(ModelError::Input(format!(
                "{ctx} positions pass the model's context of {}",
                hp.n_ctx
            )));
        }
        let t0 = Instant::now();
        let loader = WeightLoader::with_engine(engine.clone(), LoadOptions::default());
        let weights = loader.load(&model.file, &model.selection(), Residency::Raw)?;
        let load_seconds = t0.elapsed().as_secs_f64();
        let programs = Programs::new(&engine)?;
        let f = 4u64;
        let n = max_batch as u64;
        let s = |label: &str, values: u64| storage(&engine, label, values * f);
        let (e, q, kv, ff, vocab) = (
            hp.n_embd as u64,
            hp.q_dim() as u64,
            hp.kv_dim() as u64,
            hp.n_ff as u64,
            hp.n_vocab as u64,
        );
        let b = Buffers {
            ids: s("ids", n)?,
            x: s("x", n * e)?,
            xn: s("xn", n * e)?,
            q: s("q", n * q)?,
            k: s("k", n * kv)?,
            v: s("v", n * kv)?,
            qn: s("qn", n * q)?,
            kn: s("kn", n * kv)?,
            qr: s("qr", n * q)?,
            att: s("att", n * q)?,
            o: s("o", n * e)?,
            gate: s("gate", n * ff)?,
            up: s("up", n * ff)?,
            logits: s("logits", n * vocab)?,
            scores: s("scores", n * hp.n_head as u64 * ctx as u64)?,
            next: s("next", 4)?,
            staging: buffers::upload_sized(
                engine.device(),
                "next readback",
                &[],
                16,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            )?,
        };
        let kv = (0..hp.n_layer)
            .map(|il| {
                Ok((
                    s(&format!("k cache {il}"), ctx as u64 * kv)?,
                    s(&format!("v cache {il}"), ctx as u64 * kv)?,
                ))
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        let mut rope: Vec<(f32, wgpu::Buffer)> = Vec::new();
        for l in &hp.layers {
            if rope.iter().all(|(base, _)| *base != l.rope_base) {
                let table: Vec<f32> = rope_table(hp.n_rot, l.rope_base, ctx)
                    .into_iter()
                    .map(|v| v as f32)
                    .collect();
                let buf = buffers::upload_sized(
                    engine.device(),
                    "rope table",
                    bytemuck::cast_slice(&table),
                    16,
                    wgpu::BufferUsages::STORAGE,
                )?;
                rope.push((l.rope_base, buf));
            }
        }
        let recorder = engine.recorder();
        Ok(Gpu {
            engine,
            weights,
            hp,
            programs,
            recorder,
            b,
            kv,
            rope,
            max_batch,
            ctx,
            load_seconds,
            profiler: None,
            activations: Activations::F32,
            xq: None,
        })
    }

    /// Has every later forward pass's projections see their activations as `a` says.
    pub fn set_activations(&mut self, a: Activations) -> Result<(), ModelError> {
        if a == Activations::GgmlCpu && self.xq.is_none() {
            let hp = &self.hp;
            let widest = hp.n_embd.max(hp.q_dim()).max(hp.n_ff) as u64;
            let bytes = self.max_batch as u64 * widest * 4;
            self.xq = Some(storage(&self.engine, "ggml activations", bytes)?);
        }
        self.activations = a;
        Ok(())
    }

    /// Times every later forward pass's dispatches with timestamps (where the adapter has
    /// `TIMESTAMP_QUERY_INSIDE_PASSES`; an error elsewhere), read with [`Gpu::take_profile`].
    pub fn profile(&mut self) -> Result<(), ModelError> {
        let device = self.engine.device();
        if !device.features().contains(
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES,
        ) {
            return Err(ModelError::Input(
                "--profile needs timestamp queries inside passes, which this adapter lacks".into(),
            ));
        }
        let bytes = 8 * MAX_MARKS as u64;
        self.profiler = Some(Profiler {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("profile"),
                ty: wgpu::QueryType::Timestamp,
                count: MAX_MARKS,
            }),
            resolve: buffers::upload_sized(
                device,
                "profile resolve",
                &[],
                bytes,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            )?,
            read: buffers::upload_sized(
                device,
                "profile read",
                &[],
                bytes,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            )?,
            labels: Vec::new(),
            period_ns: f64::from(self.engine.queue().get_timestamp_period()),
            submitted: None,
            record_seconds: 0.0,
        });
        Ok(())
    }

    /// Ends a span named `label` (the first mark of a pass starts the first span).
    fn mark(&mut self, pass: &mut wgpu::ComputePass<'_>, label: &'static str) {
        if let Some(p) = &mut self.profiler {
            let i = p.labels.len() as u32;
            if i < MAX_MARKS {
                pass.write_timestamp(&p.set, i);
                p.labels.push(label);
            }
        }
    }

    /// The profile of the last forward pass (once it has been waited for), by kind of
    /// dispatch in order of first appearance.
    pub fn take_profile(&mut self) -> Result<Option<Profile>, ModelError> {
        let Some(p) = &mut self.profiler else {
            return Ok(None);
        };
        let Some(index) = p.submitted.take() else {
            return Ok(None);
        };
        let n = p.labels.len();
        let mut bytes = vec![0u8; 8 * n];
        self.engine.read_into(&p.read, index, &mut bytes)?;
        let stamps: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes);
        let mut gpu: Vec<(&'static str, f64)> = Vec::new();
        for i in 1..n {
            let s = stamps[i].saturating_sub(stamps[i - 1]) as f64 * p.period_ns * 1e-9;
            match gpu.iter_mut().find(|(l, _)| *l == p.labels[i]) {
                Some(e) => e.1 += s,
                None => gpu.push((p.labels[i], s)),
            }
        }
        p.labels.clear();
        Ok(Some(Profile {
            gpu,
            record_seconds: p.record_seconds,
        }))
    }

    /// What the recorder has created and recorded so far.
    pub fn stats(&self) -> RecorderStats {
        self.recorder.stats()
    }

    fn weight(&self, name: &str) -> Result<&ResidentTensor, ModelError> {
        self.weights.get(name).ok_or_else(|| ModelError::Tensor {
            path: "the loaded model".into(),
            name: name.into(),
            reason: "was not loaded".into(),
        })
    }

    /// Runs `tokens` at positions `pos0 ..` through the model, writing their K and V into the
    /// cache and the logits `which` asks for into the logits buffer; submitted, not waited for.
    pub fn forward(
        &mut self,
        tokens: &[u32],
        pos0: usize,
        which: Logits,
    ) -> Result<wgpu::SubmissionIndex, ModelError> {
        let n = tokens.len();
        if n == 0 || n > self.max_batch || pos0 + n > self.ctx {
            return Err(ModelError::Input(format!(
                "{n} tokens at position {pos0}: this run takes 1 to {} tokens per pass and {} \
                 positions",
                self.max_batch, self.ctx
            )));
        }
        let engine = self.engine.clone();
        engine
            .queue()
            .write_buffer(&self.b.ids, 0, bytemuck::cast_slice(tokens));
        let mut encoder = engine
            .device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("forward"),
            });
        let t0 = Instant::now();
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("forward"),
                timestamp_writes: None,
            });
            self.mark(&mut pass, "");
            self.record(&mut pass, n, pos0, which)?;
        }
        self.recorder.finish();
        let record_seconds = t0.elapsed().as_secs_f64();
        if let Some(p) = &mut self.profiler {
            let marks = p.labels.len() as u32;
            encoder.resolve_query_set(&p.set, 0..marks, &p.resolve, 0);
            encoder.copy_buffer_to_buffer(&p.resolve, 0, &p.read, 0, 8 * marks as u64);
            p.record_seconds = record_seconds;
        }
        let index = engine.queue().submit([encoder.finish()]);
        if let Some(p) = &mut self.profiler {
            p.submitted = Some(index.clone());
        }
        Ok(index)
    }

    fn fold(&self, groups: u64) -> [u32; 3] {
        fold(&self.engine, groups)
    }

    /// Dispatches `program` on whole buffers.
    fn run<P: bytemuck::Pod>(
        recorder: &mut Recorder,
        pass: &mut wgpu::ComputePass<'_>,
        program: &Program,
        params: &P,
        bufs: &[&wgpu::Buffer],
        groups: [u32; 3],
    ) -> Result<(), ModelError> {
        let b: Vec<wgpu::BufferBinding<'_>> = bufs
            .iter()
            .map(|buffer| wgpu::BufferBinding {
                buffer,
                offset: 0,
                size: None,
            })
            .collect();
        Ok(recorder.dispatch(pass, program, params, &b, groups)?)
    }

    /// `y = W x` for `n` tokens: matmul for a prompt, matvec for one token.
    fn mul(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        w: &str,
        x: &wgpu::Buffer,
        x_at: u64,
        y: &wgpu::Buffer,
        n: usize,
    ) -> Result<(), ModelError> {
        let weights = &self.weights;
        let weight = weights.get(w).ok_or_else(|| ModelError::Tensor {
            path: "the loaded model".into(),
            name: w.into(),
            reason: "was not loaded".into(),
        })?;
        let (x, x_at) = match (self.activations, &self.xq, ggml_vec_dot(weight.format)) {
            (Activations::GgmlCpu, Some(xq), Some(kind)) => {
                let rows = (n, weight.dims[0] as usize);
                let (recorder, program) = (&mut self.recorder, &self.programs.ggml_cpu);
                ggml_cpu(
                    &self.engine,
                    recorder,
                    pass,
                    program,
                    (x, x_at),
                    xq,
                    rows,
                    kind,
                )?;
                (xq, 0)
            }
            _ => (x, x_at),
        };
        let job = MulMatJob {
            weight,
            x: Operand {
                buffer: x,
                offset: x_at,
            },
            y: Operand::whole(y),
            batch: n as u32,
        };
        if n == 1 {
            self.recorder.matvec(pass, &job)?;
        } else {
            self.recorder.matmul(pass, &job)?;
        }
        Ok(())
    }

    fn norm(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        x: &wgpu::Buffer,
        w: &str,
        y: &wgpu::Buffer,
        rows: usize,
        d: usize,
    ) -> Result<(), ModelError> {
        let wb = self.weight(w)?.parts[0].buffer.clone();
        let p = NormParams {
            rows: rows as u32,
            d: d as u32,
            eps: self.hp.eps,
            _pad: 0,
        };
        let groups = self.fold(rows as u64);
        Gpu::run(
            &mut self.recorder,
            pass,
            &self.programs.rms_norm,
            &p,
            &[x, &wb, y],
            groups,
        )
    }

    fn elementwise<P: bytemuck::Pod>(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        program: fn(&Programs) -> &Program,
        params: &P,
        bufs: &[&wgpu::Buffer],
        n: usize,
    ) -> Result<(), ModelError> {
        let groups = self.fold((n as u64).div_ceil(64));
        Gpu::run(
            &mut self.recorder,
            pass,
            program(&self.programs),
            params,
            bufs,
            groups,
        )
    }

    fn record(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        n: usize,
        pos0: usize,
        which: Logits,
    ) -> Result<(), ModelError> {
        let hp = self.hp.clone();
        let (e, hd) = (hp.n_embd, hp.head_dim);
        let b = self.b_clone();
        // The embedding, scaled where the architecture says.
        let embd = self.weight("token_embd.weight")?.clone();
        self.recorder.get_rows(
            pass,
            &GetRowsJob {
                weight: &embd,
                ids: Operand::whole(&b.ids),
                n_ids: n as u32,
                out: Operand::whole(&b.x),
                dtype: DType::F32,
            },
        )?;
        self.mark(pass, "embedding");
        if let Some(c) = hp.embd_scale {
            let p = Words {
                a: (n * e) as u32,
                b: c.to_bits(),
                c: 0,
                d: 0,
            };
            self.elementwise(pass, |p| &p.scale, &p, &[&b.x], n * e)?;
            self.mark(pass, "embedding");
        }
        for il in 0..hp.n_layer {
            let l = |t: &str| format!("blk.{il}.{t}.weight");
            let layer = hp.layers[il];
            // Attention.
            self.norm(pass, &b.x, &l("attn_norm"), &b.xn, n, e)?;
            self.mark(pass, "norms");
            self.mul(pass, &l("attn_q"), &b.xn, 0, &b.q, n)?;
            self.mark(pass, "projections");
            self.mul(pass, &l("attn_k"), &b.xn, 0, &b.k, n)?;
            self.mark(pass, "projections");
            self.mul(pass, &l("attn_v"), &b.xn, 0, &b.v, n)?;
            self.mark(pass, "projections");
            let (q_in, k_in) = if hp.qk_norm {
                self.norm(pass, &b.q, &l("attn_q_norm"), &b.qn, n * hp.n_head, hd)?;
                self.mark(pass, "norms");
                self.norm(pass, &b.k, &l("attn_k_norm"), &b.kn, n * hp.n_head_kv, hd)?;
                self.mark(pass, "norms");
                (&b.qn, &b.kn)
            } else {
                (&b.q, &b.k)
            };
            let table = self
                .rope
                .iter()
                .find(|(base, _)| *base == layer.rope_base)
                .map(|(_, t)| t.clone())
                .ok_or_else(|| ModelError::Input("no RoPE table for a layer".into()))?;
            let (kc, vc) = self.kv[il].clone();
            let rope = |heads: usize, dst_row0: usize| RopeParams {
                tokens: n as u32,
                heads: heads as u32,
                head_dim: hd as u32,
                n_rot: hp.n_rot as u32,
                pos0: pos0 as u32,
                dst_row0: dst_row0 as u32,
                neox: u32::from(hp.rope == Rope::Neox),
                _pad: 0,
            };
            let pairs = |heads: usize| n * heads * hd / 2;
            let pq = rope(hp.n_head, 0);
            self.elementwise(
                pass,
                |p| &p.rope,
                &pq,
                &[q_in, &table, &b.qr],
                pairs(hp.n_head),
            )?;
            self.mark(pass, "rope + KV cache");
            let pk = rope(hp.n_head_kv, pos0);
            self.elementwise(
                pass,
                |p| &p.rope,
                &pk,
                &[k_in, &table, &kc],
                pairs(hp.n_head_kv),
            )?;
            self.mark(pass, "rope + KV cache");
            let pv = Words {
                a: n as u32,
                b: hp.kv_dim() as u32,
                c: pos0 as u32,
                d: 0,
            };
            self.elementwise(pass, |p| &p.copy_rows, &pv, &[&b.v, &vc], n * hp.kv_dim())?;
            self.mark(pass, "rope + KV cache");
            let pa = AttnParams {
                tokens: n as u32,
                heads: hp.n_head as u32,
                kv_heads: hp.n_head_kv as u32,
                head_dim: hd as u32,
                pos0: pos0 as u32,
                window: layer.window.unwrap_or(0),
                s_stride: self.ctx as u32,
                scale: hp.q_scale,
            };
            let groups = self.fold((n * hp.n_head) as u64);
            Gpu::run(
                &mut self.recorder,
                pass,
                &self.programs.attention,
                &pa,
                &[&b.qr, &kc, &vc, &b.scores, &b.att],
                groups,
            )?;
            self.mark(pass, "attention");
            self.mul(pass, &l("attn_output"), &b.att, 0, &b.o, n)?;
            self.mark(pass, "projections");
            self.residual(pass, &b, hp.post_norms.then(|| l("post_attention_norm")), n)?;
            // Feed-forward.
            self.norm(pass, &b.x, &l("ffn_norm"), &b.xn, n, e)?;
            self.mark(pass, "norms");
            self.mul(pass, &l("ffn_gate"), &b.xn, 0, &b.gate, n)?;
            self.mark(pass, "projections");
            self.mul(pass, &l("ffn_up"), &b.xn, 0, &b.up, n)?;
            self.mark(pass, "projections");
            let glu = Words {
                a: (n * hp.n_ff) as u32,
                b: match (hp.act, self.activations) {
                    (Act::Silu, _) => 0,
                    (Act::GeluTanh, Activations::F32) => 1,
                    (Act::GeluTanh, Activations::GgmlCpu) => 2,
                },
                c: 0,
                d: 0,
            };
            self.elementwise(pass, |p| &p.glu, &glu, &[&b.gate, &b.up], n * hp.n_ff)?;
            self.mark(pass, "activation");
            self.mul(pass, &l("ffn_down"), &b.gate, 0, &b.o, n)?;
            self.mark(pass, "projections");
            self.residual(pass, &b, hp.post_norms.then(|| l("post_ffw_norm")), n)?;
        }
        self.norm(pass, &b.x, "output_norm.weight", &b.xn, n, e)?;
        self.mark(pass, "norms");
        let output = hp.output.clone();
        match which {
            Logits::All => {
                self.mul(pass, &output, &b.xn, 0, &b.logits, n)?;
                self.mark(pass, "output head");
            }
            Logits::Last => {
                let at = ((n - 1) * e * 4) as u64;
                self.mul(pass, &output, &b.xn, at, &b.logits, 1)?;
                self.mark(pass, "output head");
                let p = Words {
                    a: hp.n_vocab as u32,
                    b: 0,
                    c: 0,
                    d: 0,
                };
                Gpu::run(
                    &mut self.recorder,
                    pass,
                    &self.programs.argmax,
                    &p,
                    &[&b.logits, &b.next],
                    [1, 1, 1],
                )?;
                self.mark(pass, "argmax");
                self.mark(pass, "output head");
            }
        }
        Ok(())
    }

    /// `x += o`, or `x += RMSNorm(o)` with the weight `post_norm` where the architecture norms a
    /// block's output before adding it.
    fn residual(
        &mut self,
        pass: &mut wgpu::ComputePass<'_>,
        b: &Buffers,
        post_norm: Option<String>,
        n: usize,
    ) -> Result<(), ModelError> {
        let e = self.hp.n_embd;
        let out = match post_norm {
            Some(w) => {
                self.norm(pass, &b.o, &w, &b.xn, n, e)?;
                self.mark(pass, "norms");
                &b.xn
            }
            None => &b.o,
        };
        let add = Words {
            a: (n * e) as u32,
            b: 0,
            c: 0,
            d: 0,
        };
        self.elementwise(pass, |p| &p.add, &add, &[&b.x, out], n * e)?;
        self.mark(pass, "residual adds");
        Ok(())
    }

    /// The buffers, cheaply (each a reference-counted handle), so that recording can borrow
    /// `self` mutably.
    fn b_clone(&self) -> Buffers {
        let b = &self.b;
        Buffers {
            ids: b.ids.clone(),
            x: b.x.clone(),
            xn: b.xn.clone(),
            q: b.q.clone(),
            k: b.k.clone(),
            v: b.v.clone(),
            qn: b.qn.clone(),
            kn: b.kn.clone(),
            qr: b.qr.clone(),
            att: b.att.clone(),
            o: b.o.clone(),
            gate: b.gate.clone(),
            up: b.up.clone(),
            logits: b.logits.clone(),
            scores: b.scores.clone(),
            next: b.next.clone(),
            staging: b.staging.clone(),
        }
    }

    /// The greedy next token after `tokens` at positions `pos0 ..`: a forward pass of the last
    /// position's logits, the argmax on the GPU, four bytes read back.
    pub fn next_token(&mut self, tokens: &[u32], pos0: usize) -> Result<u32, ModelError> {
        self.forward(tokens, pos0, Logits::Last)?;
        let engine = self.engine.clone();
        let mut encoder = engine.device().create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&self.b.next, 0, &self.b.staging, 0, 4);
        let index = engine.queue().submit([encoder.finish()]);
        let mut out = [0u8; 4];
        engine
            .read_into(&self.b.staging, index, &mut out)
            .map_err(gguf_dequant::Error::from)?;
        Ok(u32::from_le_bytes(out))
    }

    /// The logits of a teacher-forced pass over `tokens` from position 0: `[n, n_vocab]`.
    pub fn all_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        self.forward(tokens, 0, Logits::All)?;
        let len = (tokens.len() * self.hp.n_vocab * 4) as u64;
        let engine = self.engine.clone();
        let encoder = engine.device().create_command_encoder(&Default::default());
        read_back(&engine, encoder, &self.b.logits, len)
    }
}

/// `groups` workgroups as a grid within the device's limit per dimension.
fn fold(engine: &GpuEngine, groups: u64) -> [u32; 3] {
    let max = engine.limits().max_compute_workgroups_per_dimension as u64;
    if groups <= max {
        return [groups.max(1) as u32, 1, 1];
    }
    let y = groups.div_ceil(max);
    [groups.div_ceil(y) as u32, y as u32, 1]
}

/// Records `wgsl/ggml_cpu.wgsl`: `rows.0` rows of `rows.1` values of `x` from byte `x.1` into
/// `xq` as the quantisation `kind` ([`ggml_vec_dot`]) has them.
#[allow(clippy::too_many_arguments)]
fn ggml_cpu(
    engine: &GpuEngine,
    recorder: &mut Recorder,
    pass: &mut wgpu::ComputePass<'_>,
    program: &Program,
    x: (&wgpu::Buffer, u64),
    xq: &wgpu::Buffer,
    rows: (usize, usize),
    kind: u32,
) -> Result<(), ModelError> {
    let p = Words {
        a: rows.0 as u32,
        b: rows.1 as u32,
        c: (x.1 / 4) as u32,
        d: kind,
    };
    let blocks = (rows.0 as u64 * rows.1 as u64).div_ceil(GGML_BLOCK[kind as usize]);
    let groups = fold(engine, blocks.div_ceil(64));
    Gpu::run(recorder, pass, program, &p, &[x.0, xq], groups)
}

/// `len` bytes of `src` read back, after what `encoder` holds.
fn read_back(
    engine: &GpuEngine,
    mut encoder: wgpu::CommandEncoder,
    src: &wgpu::Buffer,
    len: u64,
) -> Result<Vec<f32>, ModelError> {
    let staging = buffers::upload_sized(
        engine.device(),
        "readback",
        &[],
        len,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    )?;
    encoder.copy_buffer_to_buffer(src, 0, &staging, 0, len);
    let index = engine.queue().submit([encoder.finish()]);
    let mut out = vec![0u8; len as usize];
    engine
        .read_into(&staging, index, &mut out)
        .map_err(gguf_dequant::Error::from)?;
    Ok(bytemuck::pod_collect_to_vec(&out))
}

/// Rows of `k` activations as [`Activations::GgmlCpu`] has them for the quantisation `kind`
/// ([`ggml_vec_dot`]): `wgsl/ggml_cpu.wgsl` alone, for the tests.
#[cfg(test)]
pub fn ggml_cpu_round(
    engine: &GpuEngine,
    x: &[f32],
    k: usize,
    kind: u32,
) -> Result<Vec<f32>, ModelError> {
    let programs = Programs::new(engine)?;
    let mut recorder = engine.recorder();
    let bytes = (x.len() * 4) as u64;
    let src = storage(engine, "x", bytes)?;
    engine
        .queue()
        .write_buffer(&src, 0, bytemuck::cast_slice(x));
    let dst = storage(engine, "xq", bytes)?;
    let mut encoder = engine.device().create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        let rows = (x.len() / k, k);
        let program = &programs.ggml_cpu;
        ggml_cpu(
            engine,
            &mut recorder,
            &mut pass,
            program,
            (&src, 0),
            &dst,
            rows,
            kind,
        )?;
    }
    recorder.finish();
    read_back(engine, encoder, &dst, bytes)
}

//! The matvecs of one transformer block on raw GGUF weights, the way an inference engine on wgpu
//! would run them: load a real model's block 0 and token embedding raw (blocks untouched), then
//! record with one kept `Recorder` into one compute pass an embedding lookup of a few tokens
//! (`get_rows`) and the block's seven projections, each reading the previous one's output buffer,
//! those that read the same buffer recorded together (`Recorder::matvecs`: under `--precision
//! int8` their x is quantised once):
//!
//! ```text
//! e = token_embd[ids]          q = attn_q e    k = attn_k e    v = attn_v e    o = attn_output q
//! g = ffn_gate e               u = ffn_up e    d = ffn_down g
//! ```
//!
//! (attention, norms and activations are the engine's own kernels; here each projection takes the
//! output of the one before as its input). The step is recorded and submitted twice: the second
//! time the recorder creates no wgpu object (printed). Then every result is read back and
//! checked against the f64 CPU reference (`gguf_dequant::ops`) within the accuracy contract of
//! the precision it ran (`exact`: `K · 2⁻²³ · Σ|w·x|`); the figures are printed.
//!
//! ```text
//! cargo run --release --example transformer_block -- [MODEL.gguf] [--tokens N] [--backend B]
//!     [--precision exact|factored|int8]
//! ```
//!
//! MODEL defaults to `~/.cache/gguf-dequant/models/SmolLM2-135M-Instruct.Q4_1.gguf` (the test
//! command downloads it; `gemma-3-270m-q4_k_m.gguf` is the other).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use gguf_dequant::gpu::kernels::RecorderStats;
use gguf_dequant::gpu::kernels::{GetRowsJob, MulMatJob, Op, Operand, Precision};
use gguf_dequant::gpu::loader::{LoadOptions, Residency, ResidentTensor, WeightLoader};
use gguf_dequant::gpu::{EngineOptions, GpuEngine};
use gguf_dequant::{ops, Backend, DType, GgufFile, Selection};

/// (output, weight, input) of each step; "e" is the embedding lookup.
const STEPS: [(&str, &str, &str); 7] = [
    ("q", "attn_q", "e"),
    ("k", "attn_k", "e"),
    ("v", "attn_v", "e"),
    ("o", "attn_output", "q"),
    ("g", "ffn_gate", "e"),
    ("u", "ffn_up", "e"),
    ("d", "ffn_down", "g"),
];

/// The steps' inputs, each after the step that writes it.
const INPUTS: [&str; 3] = ["e", "q", "g"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut model = None;
    let mut tokens = 4usize;
    let mut backend = Backend::Auto;
    let mut precision = Precision::Exact;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--tokens" => tokens = value()?.parse()?,
            "--backend" => backend = value()?.parse()?,
            "--precision" => precision = value()?.parse()?,
            _ => model = Some(PathBuf::from(a)),
        }
    }
    let model = model.unwrap_or_else(|| {
        let home = std::env::var_os("HOME").unwrap_or_default();
        PathBuf::from(home).join(".cache/gguf-dequant/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    });
    if !(1..=8).contains(&tokens) {
        return Err("--tokens takes 1 to 8 (one matvec per projection)".into());
    }

    // Load the embedding and block 0, raw.
    let options = EngineOptions {
        precision,
        ..EngineOptions::default()
    };
    let engine = Arc::new(GpuEngine::with_options(backend, options)?);
    let loader = WeightLoader::with_engine(engine.clone(), LoadOptions::default());
    let file = GgufFile::open(&model)?;
    let mut names = vec!["token_embd.weight".to_string()];
    names.extend(STEPS.iter().map(|s| format!("blk.0.{}.weight", s.1)));
    let t0 = Instant::now();
    let resident = loader.load(&file, &Selection::names(names.clone()), Residency::Raw)?;
    let load_s = t0.elapsed().as_secs_f64();
    let get = |name: &str| -> Result<&ResidentTensor, String> {
        resident
            .get(name)
            .ok_or_else(|| format!("{} has no tensor {name}", model.display()))
    };
    let embd = get(&names[0])?;
    println!(
        "{} on {} ({:?}): loaded {} tensors raw, {:.1} MB, in {load_s:.2} s",
        model.display(),
        engine.adapter_info().name,
        engine.adapter_info().backend,
        names.len(),
        resident.report().bytes_resident as f64 / 1e6
    );

    // Token ids at both ends of the vocabulary and in between.
    let vocab = embd.dims[1] as u32;
    let ids: Vec<u32> = (0..tokens as u32)
        .map(|i| (i * 7919 + i * i * 104_729) % vocab)
        .chain([vocab - 1])
        .skip(1)
        .collect();
    let device = engine.device();
    let storage = |label: &str, bytes: u64| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.next_multiple_of(16),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    };
    let ids_buf = gguf_dequant::gpu::buffers::upload(device, "ids", bytemuck::cast_slice(&ids))?;
    let dim = embd.dims[0];
    let mut outputs = vec![("e", dim, storage("e", tokens as u64 * dim * 4))];

    for (out, weight, _) in STEPS {
        let n = get(&format!("blk.0.{weight}.weight"))?.dims[1];
        outputs.push((out, n, storage(out, tokens as u64 * n * 4)));
    }
    // Record everything into one compute pass with one recorder, as an engine's forward pass
    // would; the second run is timed (the first includes the driver's own warm-up) and creates
    // no wgpu object.
    let mut recorder = engine.recorder();
    let mut gpu_ms = 0.0;
    let mut step = RecorderStats::default();
    for _ in 0..2 {
        let before = recorder.stats();
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let buffer = |name: &str| &outputs.iter().find(|o| o.0 == name).expect("allocated").2;
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            recorder.get_rows(
                &mut pass,
                &GetRowsJob {
                    weight: embd,
                    ids: Operand::whole(&ids_buf),
                    n_ids: tokens as u32,
                    out: Operand::whole(buffer("e")),
                    dtype: DType::F32,
                },
            )?;
            // The projections by input, in the order the inputs are written.
            for input in INPUTS {
                let jobs = STEPS
                    .iter()
                    .filter(|s| s.2 == input)
                    .map(|&(out, weight, _)| {
                        Ok(MulMatJob {
                            weight: get(&format!("blk.0.{weight}.weight"))?,
                            x: Operand::whole(buffer(input)),
                            y: Operand::whole(buffer(out)),
                            batch: tokens as u32,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                recorder.matvecs(&mut pass, &jobs)?;
            }
        }
        recorder.finish();
        let t0 = Instant::now();
        engine.queue().submit([encoder.finish()]);
        device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: None,
        })?;
        gpu_ms = t0.elapsed().as_secs_f64() * 1e3;
        step = recorder.stats().since(&before);
    }

    // Read back and check every step against the CPU reference from the same inputs.
    let read = |buf: &wgpu::Buffer, n: usize| -> Result<Vec<f32>, Box<dyn std::error::Error>> {
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: buf.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(buf, 0, &staging, 0, buf.size());
        engine.queue().submit([enc.finish()]);
        staging.slice(..).map_async(wgpu::MapMode::Read, |_| ());
        device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: None,
        })?;
        let view = staging.slice(..).get_mapped_range()?;
        Ok(bytemuck::pod_collect_to_vec::<u8, f32>(&view)[..n].to_vec())
    };
    let values = |name: &str| -> Result<Vec<f32>, Box<dyn std::error::Error>> {
        let o = outputs.iter().find(|o| o.0 == name).expect("recorded");
        read(&o.2, tokens * o.1 as usize)
    };
    let embd_info = file.tensor(&names[0]).expect("loaded");
    let want = ops::get_rows(embd.format, file.tensor_data(embd_info), dim as usize, &ids)?;
    let e = values("e")?;
    let exact = e.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
    println!(
        "get_rows token_embd ({}, {dim} x {vocab}) ids {ids:?}: {}",
        embd.format,
        if exact { "bit-exact" } else { "MISMATCH" }
    );
    let mut ok = exact;
    for (out, weight, input) in STEPS {
        let name = format!("blk.0.{weight}.weight");
        let info = file.tensor(&name).expect("loaded");
        let (k, n) = (info.dims[0] as usize, info.dims[1] as usize);
        let x = values(input)?;
        let p = engine.precision_for(Op::MatVec, info.format, k as u64);
        let sums = ops::mul_mat_in(p, info.format, file.tensor_data(info), k, &x, tokens)?;
        let fraction = sums.max_fraction(&values(out)?)?;
        ok &= fraction <= 1.0;
        println!(
            "matvec {name:26} {:6} [{k:5}, {n:5}] x {tokens} ({p}): largest error {fraction:.2e} of the bound",
            info.format.name()
        );
    }
    println!(
        "one submission: {gpu_ms:.2} ms (get_rows + 7 matvecs, wall clock, second run); the \
         second step recorded {} dispatches and created {} wgpu objects",
        step.dispatches,
        step.objects_created()
    );
    if !ok {
        return Err("a result is outside the accuracy contract".into());
    }
    Ok(())
}

//! Text in, text out: a GGUF model run end to end on the GPU by an engine built on gguf-dequant,
//! the way an inference engine on wgpu would use the library (see `gpu.rs`).
//!
//! ```text
//! cargo run --release --example generate -- MODEL.gguf (--prompt TEXT | --tokens ID,ID,…)
//!     [--n N] [--ignore-eos] [--backend B] [--logits OUT.npy] [--reference-logits OUT.npy] [--json]
//!     [--profile] [--activations f32|ggml-cpu]
//! ```
//!
//! Greedy decoding of up to `N` tokens (default 32; stopping at an end-of-sequence token unless
//! `--ignore-eos`) after the prompt, which runs as one batch. Prints the generated text, then
//! prompt and generation speed in tokens per second as llama-bench reports them (pp: prompt
//! tokens ÷ the prompt's seconds; tg: generated tokens ÷ their seconds; both after one untimed
//! warm-up pass, which compiles the shaders). `--logits OUT.npy` writes the f32 logits of every
//! prompt position, teacher forced, `[positions, n_vocab]`. `--json` prints one object instead:
//! the prompt's token ids, the generated ids, the text, both speeds, the adapter. `--profile`
//! then runs the prompt and one decoding step once more with GPU timestamps between the
//! dispatches and prints where each one's time went (GPU seconds by kind of dispatch, CPU
//! seconds recording, and the rest of the wall time: submission, waiting, the read-back).
//! `--activations ggml-cpu` has every projection's dot products see their activations as
//! llama.cpp's CPU backend does (quantised to the weight's `vec_dot_type`, GELU through ggml's
//! f16 table: [`gpu::Activations`]): what that rounding costs against exact arithmetic.
//!
//! Architectures: `llama` (SmolLM2) and `gemma3` (Gemma 3), one file each in `arch/`; the
//! tokenizer is the file's own (`tokenizer.rs`). Every error is one `error:` line, exit 1.

mod arch;
mod gpu;
mod model;
mod reference;
mod tokenizer;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use gguf_dequant::gpu::{EngineOptions, GpuEngine};
use gguf_dequant::output::{self, OutputFormat, OutputTensor};
use gguf_dequant::{Backend, DType};

use gpu::{Activations, Gpu};
use model::{Model, ModelError};
use tokenizer::Tok;

struct Args {
    model: PathBuf,
    prompt: Option<String>,
    tokens: Option<Vec<u32>>,
    n: usize,
    ignore_eos: bool,
    backend: Backend,
    logits: Option<PathBuf>,
    reference_logits: Option<PathBuf>,
    json: bool,
    profile: bool,
    activations: Activations,
}

const USAGE: &str = "usage: generate MODEL.gguf (--prompt TEXT | --tokens ID,ID,...) [--n N] \
                     [--ignore-eos] [--backend B] [--logits OUT.npy] [--reference-logits OUT.npy] \
                     [--json] [--profile] [--activations f32|ggml-cpu]";

fn args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        model: PathBuf::new(),
        prompt: None,
        tokens: None,
        n: 32,
        ignore_eos: false,
        backend: Backend::Auto,
        logits: None,
        reference_logits: None,
        json: false,
        profile: false,
        activations: Activations::F32,
    };
    let mut model = None;
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value; {USAGE}"));
        match arg.as_str() {
            "--prompt" => a.prompt = Some(value()?),
            "--tokens" => {
                let v = value()?;
                let ids = v
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<u32>()
                            .map_err(|_| format!("--tokens: `{s}` is not a token id"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                a.tokens = Some(ids);
            }
            "--n" => {
                a.n = value()?
                    .parse()
                    .map_err(|_| "--n takes a count".to_string())?
            }
            "--ignore-eos" => a.ignore_eos = true,
            "--backend" => {
                a.backend = value()?
                    .parse()
                    .map_err(|e: gguf_dequant::Error| e.to_string())?
            }
            "--logits" => a.logits = Some(PathBuf::from(value()?)),
            "--reference-logits" => a.reference_logits = Some(PathBuf::from(value()?)),
            "--json" => a.json = true,
            "--profile" => a.profile = true,
            "--activations" => {
                a.activations = match value()?.as_str() {
                    "f32" => Activations::F32,
                    "ggml-cpu" => Activations::GgmlCpu,
                    v => return Err(format!("--activations takes f32 or ggml-cpu, not `{v}`")),
                }
            }
            "-h" | "--help" => return Err(USAGE.into()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}; {USAGE}")),
            _ if model.is_none() => model = Some(PathBuf::from(arg)),
            _ => return Err(format!("one model only; {USAGE}")),
        }
    }
    a.model = model.ok_or(USAGE)?;
    if a.prompt.is_some() == a.tokens.is_some() {
        return Err(format!("give --prompt or --tokens; {USAGE}"));
    }
    Ok(a)
}

fn main() {
    // Mesa's Vulkan driver probes Wayland on a headless machine and prints noise without this.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), ModelError> {
    let model = Model::open(&args.model)?;
    let tok = Tok::from_gguf(&model.file).map_err(|e| ModelError::Input(e.to_string()))?;
    let prompt = match (&args.tokens, &args.prompt) {
        (Some(ids), _) => ids.clone(),
        (None, Some(text)) => tok
            .encode(text)
            .map_err(|e| ModelError::Input(e.to_string()))?,
        (None, None) => Vec::new(),
    };
    model.check_tokens(&prompt, args.n)?;
    // One forward pass is one submission: on a CPU adapter a long prompt takes minutes.
    let options = EngineOptions {
        timeout: std::time::Duration::from_secs(3600),
        ..Default::default()
    };
    let engine = Arc::new(GpuEngine::with_options(args.backend, options)?);
    let mut gpu = Gpu::new(engine.clone(), &model, prompt.len(), prompt.len() + args.n)?;
    gpu.set_activations(args.activations)?;

    let write = |path: &PathBuf, logits: &[f32]| -> Result<(), ModelError> {
        Ok(output::write(
            path,
            OutputFormat::Npy,
            DType::F32,
            &[OutputTensor {
                name: "logits".into(),
                shape: vec![prompt.len(), model.hp.n_vocab],
            }],
            None,
            &|_| Ok(bytemuck::cast_slice::<f32, u8>(logits).to_vec()),
        )?)
    };
    if let Some(path) = &args.reference_logits {
        let r: Vec<f32> = reference::logits(&model, &prompt)?
            .into_iter()
            .map(|v| v as f32)
            .collect();
        write(path, &r)?;
    }
    if let Some(path) = &args.logits {
        write(path, &gpu.all_logits(&prompt)?)?;
    }

    // One untimed pass compiles every pipeline; the prompt is then timed as one batch.
    gpu.next_token(&prompt, 0)?;
    let t0 = Instant::now();
    let mut next = gpu.next_token(&prompt, 0)?;
    let pp_seconds = t0.elapsed().as_secs_f64();
    let mut generated = Vec::new();
    let t1 = Instant::now();
    while generated.len() < args.n {
        generated.push(next);
        if !args.ignore_eos && tok.eos.contains(&next) {
            break;
        }
        if generated.len() == args.n {
            break;
        }
        next = gpu.next_token(&[next], prompt.len() + generated.len() - 1)?;
    }
    let tg_seconds = t1.elapsed().as_secs_f64();
    let tg_tokens = generated.len().saturating_sub(1);
    let pp = prompt.len() as f64 / pp_seconds;
    let tg = if tg_tokens > 0 {
        tg_tokens as f64 / tg_seconds
    } else {
        0.0
    };
    let profiles = if args.profile {
        gpu.profile()?;
        let mut out = Vec::new();
        for (what, tokens, pos) in [
            ("prompt", prompt.clone(), 0),
            (
                "decoding step",
                vec![next],
                prompt.len() + generated.len().saturating_sub(1),
            ),
        ] {
            if pos + tokens.len() > prompt.len() + args.n {
                continue;
            }
            let t = Instant::now();
            gpu.next_token(&tokens, pos)?;
            let wall = t.elapsed().as_secs_f64();
            if let Some(p) = gpu.take_profile()? {
                out.push((what, tokens.len(), wall, p));
            }
        }
        out
    } else {
        Vec::new()
    };
    let text = tok.decode(&generated);
    let adapter = format!(
        "{} ({})",
        engine.adapter_info().name,
        engine.adapter_info().backend.to_string().to_lowercase()
    );
    let mut out = std::io::stdout().lock();
    if args.json {
        let j = serde_json::json!({
            "model": args.model.display().to_string(),
            "prompt_ids": prompt,
            "generated_ids": generated,
            "text": text,
            "pp_tokens_per_s": pp,
            "tg_tokens_per_s": tg,
            "adapter": adapter,
            "load_seconds": gpu.load_seconds,
            "steps_recorded": gpu.stats().recordings,
        });
        let _ = writeln!(out, "{j}");
    } else {
        let _ = writeln!(out, "{text}");
        let _ = writeln!(
            out,
            "pp {pp:.2} tokens/s ({} tokens), tg {tg:.2} tokens/s ({tg_tokens} tokens) on {adapter}",
            prompt.len()
        );
    }
    for (what, tokens, wall, p) in &profiles {
        let gpu_total: f64 = p.gpu.iter().map(|(_, s)| s).sum();
        let _ = writeln!(
            out,
            "profile, {what} ({tokens} tokens): {:.1} ms wall = {:.1} ms GPU + {:.1} ms recording + \
             {:.1} ms submission, waiting and read-back",
            wall * 1e3,
            gpu_total * 1e3,
            p.record_seconds * 1e3,
            (wall - gpu_total - p.record_seconds).max(0.0) * 1e3
        );
        for (label, s) in &p.gpu {
            let _ = writeln!(
                out,
                "  {label:18} {:9.2} ms  {:5.1} %",
                s * 1e3,
                100.0 * s / gpu_total
            );
        }
    }
    Ok(())
}

//! examples/generate on every adapter: both real models' logits of a teacher-forced sequence of
//! 32 tokens from the GPU forward pass against the f64 CPU forward pass from the CPU codecs
//! (`reference.rs`), within the stated bound; greedy generation repeats the teacher-forced
//! argmax and a warm decoding step creates no wgpu object; bad models and inputs are typed
//! one-line errors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use gguf_dequant::gpu::GpuEngine;

use crate::gpu::{self as engine_gpu, Gpu};
use crate::gpu_test;
use crate::model::Model;
use crate::support;
use crate::support::gpu::label;
use crate::tokenizer::Tok;

/// The teacher-forced text (tokenized by the model's own tokenizer; its first 32 tokens).
const TEXT: &str = "The history of astronomy spans thousands of years. Early observers tracked \
                    the motions of the Sun, the Moon and the planets, and built calendars around \
                    them. In the seventeenth century, Galileo turned a telescope to the sky and \
                    saw the moons of Jupiter.";
const TOKENS: usize = 32;

/// The f64 reference logits of each model, computed once per test process.
fn reference(path: &std::path::Path, tokens: &[u32]) -> Arc<Vec<f64>> {
    static CACHE: OnceLock<Mutex<HashMap<std::path::PathBuf, Arc<Vec<f64>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    // Held while computing, so that concurrent tests wait instead of computing it twice.
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    map.entry(path.to_path_buf())
        .or_insert_with(|| {
            let model = Model::open(path).unwrap();
            Arc::new(crate::reference::logits(&model, tokens).unwrap())
        })
        .clone()
}

/// How far `got` is from `want`: the largest |Δlogit| over the largest |logit| of its row;
/// infinite when any value is not finite.
fn worst_relative(want: &[f64], got: &[f32], vocab: usize) -> f64 {
    want.chunks_exact(vocab)
        .zip(got.chunks_exact(vocab))
        .map(|(w, g)| {
            let scale = w.iter().fold(0f64, |m, v| m.max(v.abs()));
            w.iter()
                .zip(g)
                .map(|(w, g)| {
                    let d = (w - f64::from(*g)).abs();
                    if d.is_finite() {
                        d
                    } else {
                        f64::INFINITY
                    }
                })
                .fold(0f64, f64::max)
                / scale
        })
        .fold(0f64, f64::max)
}

fn logits_match_the_f64_reference(engine: GpuEngine) {
    let engine = Arc::new(engine);
    for name in support::MODEL_FILES {
        let Some(path) = support::model_file("generate_logits", name) else {
            return;
        };
        let model = Model::open(&path).unwrap();
        let tok = Tok::from_gguf(&model.file).unwrap();
        let mut tokens = tok.encode(TEXT).unwrap();
        assert!(tokens.len() >= TOKENS, "{name}: {} tokens", tokens.len());
        tokens.truncate(TOKENS);
        let t0 = std::time::Instant::now();
        let want = reference(&path, &tokens);
        let t_ref = t0.elapsed().as_secs_f64();
        let t0 = std::time::Instant::now();
        let vocab = model.hp.n_vocab;
        let mut gpu = Gpu::new(engine.clone(), &model, tokens.len(), tokens.len() + 4).unwrap();
        let got = gpu.all_logits(&tokens).unwrap();
        let t_gpu = t0.elapsed().as_secs_f64();
        assert_eq!(got.len(), want.len());
        let rel = worst_relative(&want, &got, vocab);
        // The argmax of every position.
        let argmax = |row: &[f32]| {
            row.iter()
                .enumerate()
                .fold(
                    (0, f32::NEG_INFINITY),
                    |b, (i, &v)| if v > b.1 { (i, v) } else { b },
                )
                .0
        };
        let want_top: Vec<usize> = want
            .chunks_exact(vocab)
            .map(|r| {
                r.iter()
                    .enumerate()
                    .fold(
                        (0, f64::NEG_INFINITY),
                        |b, (i, &v)| if v > b.1 { (i, v) } else { b },
                    )
                    .0
            })
            .collect();
        let got_top: Vec<usize> = got.chunks_exact(vocab).map(argmax).collect();
        let agree = want_top
            .iter()
            .zip(&got_top)
            .filter(|(a, b)| a == b)
            .count();
        for (p, (a, b)) in want_top
            .iter()
            .zip(&got_top)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
        {
            let w = &want[p * vocab..(p + 1) * vocab];
            let g = &got[p * vocab..(p + 1) * vocab];
            eprintln!(
                "  position {p}: reference top {a} ({} / got {}), got top {b} ({} / got {})",
                w[*a], g[*a], w[*b], g[*b]
            );
        }
        eprintln!(
            "[generate] {} {name}: {TOKENS} positions, largest |Δlogit| / max|logit| = {rel:.3e} \
             ({:.4} of the bound), top-1 agrees at {agree}; reference {t_ref:.1} s, GPU load and \
             pass {t_gpu:.1} s",
            label(&engine),
            rel / bound(&model.hp)
        );
        let bound = bound(&model.hp);
        assert!(
            rel <= bound,
            "{name}: {rel:.3e} of max|logit|, over the bound {bound:.3e}"
        );
        assert_eq!(agree, TOKENS, "{name}: the top token of every position");
        // Greedy decoding, one token at a time through the KV cache (matvec, not matmul): the
        // prompt's first 8 tokens, then the teacher's tokens one by one; each step's token is
        // the reference's top token of that position (where it is not a near tie), and a warm
        // step creates no wgpu object.
        let mut next = gpu.next_token(&tokens[..8], 0).unwrap();
        for p in 8..12 {
            let row = &want[(p - 1) * vocab..p * vocab];
            let mut sorted: Vec<f64> = row.to_vec();
            sorted.sort_by(|a, b| b.total_cmp(a));
            if sorted[0] - sorted[1] > 1e-3 * sorted[0].abs() {
                assert_eq!(
                    next as usize,
                    want_top[p - 1],
                    "{name}: decoding at position {}",
                    p - 1
                );
            }
            let before = engine.kernel_objects_created();
            let stats = gpu.stats();
            next = gpu.next_token(&tokens[p..p + 1], p).unwrap();
            if p >= 10 {
                let made = gpu.stats().since(&stats);
                assert_eq!(made.objects_created(), 0, "{name}: step at {p}: {made:?}");
                assert_eq!(
                    engine.kernel_objects_created(),
                    before,
                    "{name}: step at {p}"
                );
            }
        }
    }
}

/// The stated bound on every position's largest |Δlogit| as a fraction of its largest |logit|:
/// f32 summation's worst case for the longest sum of the model (`K_max · 2⁻²³`, K_max the
/// largest of n_embd, n_ff and the query width), once for each layer and once for the output
/// head, added up: each layer's RMSNorm rescales its input, so a layer's rounding stays
/// relative to the residual stream's scale and the layers' errors add rather than multiply. A
/// model of how f32 errors grow (as the kernels' contract is for one sum), not a proof for
/// attention and the activations; the tests print the observed fraction.
fn bound(h: &crate::model::Hparams) -> f64 {
    let k_max = h.n_embd.max(h.n_ff).max(h.q_dim()) as f64;
    (h.n_layer as f64 + 1.0) * k_max * f64::powi(2.0, -23)
}
// A pass of a prompt on a CPU adapter of a loaded machine may take longer than the default minute.
gpu_test!(
    generate_logits,
    logits_match_the_f64_reference,
    options = gguf_dequant::gpu::EngineOptions {
        timeout: std::time::Duration::from_secs(600),
        ..Default::default()
    }
);

/// ggml's CPU quantisation of activations, decoded back to f32 (what `wgsl/ggml_cpu.wgsl`
/// gives), with each value's scaled argument `x · id` (NaN for kinds 2 and 3): kind 0 is
/// `quantize_row_q8_0` as llama.cpp builds it for x86 (the AVX2 path of
/// ggml-cpu/arch/x86/quants.c: d = f16(max|x| / 127), q = round-to-even(x · 127 / max|x|)), 1
/// is `quantize_row_q8_K_ref` (ggml-quants.c: the first value of largest magnitude, with its
/// sign, sets iscale = -127 / it, q = min(127, nearest_int(iscale · x)), d = 1 / iscale in f32),
/// 2 and 3 round each value to f16 and bf16.
fn ggml_round(kind: u32, x: &[f32]) -> Vec<(f32, f32)> {
    match kind {
        0 => x
            .chunks_exact(32)
            .flat_map(|b| {
                let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
                let d = half::f16::from_f32(amax / 127.0).to_f32();
                let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
                b.iter()
                    .map(move |v| (d * (v * id).round_ties_even(), v * id))
            })
            .collect(),
        1 => x
            .chunks_exact(256)
            .flat_map(|b| {
                let (mut amax, mut max) = (0f32, 0f32);
                for &v in b {
                    if v.abs() > amax {
                        (amax, max) = (v.abs(), v);
                    }
                }
                let iscale = if amax != 0.0 { -127.0 / max } else { 0.0 };
                let d = if amax != 0.0 { 1.0 / iscale } else { 0.0 };
                b.iter().map(move |v| {
                    let t = iscale * v;
                    (d * t.round_ties_even().min(127.0), t)
                })
            })
            .collect(),
        2 => x
            .iter()
            .map(|&v| (half::f16::from_f32(v).to_f32(), f32::NAN))
            .collect(),
        _ => x
            .iter()
            .map(|&v| (half::bf16::from_f32(v).to_f32(), f32::NAN))
            .collect(),
    }
}

/// `--activations ggml-cpu`'s quantiser follows ggml's rules, on rows of random activations of
/// mixed scales with an all-zero block and blocks led by a negative value. f16 and bf16 are
/// bit-exact; a Q8 value is within 8 ulp of ggml's (WGSL's division, which sets the scales, is
/// within 2.5 ulp, not correctly rounded), or, where `x · id` is within 10⁻⁴ of a half-integer,
/// within one quant.
fn ggml_cpu_activations_are_ggmls(engine: GpuEngine) {
    let k = 512;
    let mut rng = crate::support::rng::Rng::new(23);
    let mut x: Vec<f32> = (0..3 * k)
        .map(|i| {
            let u = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            u * [1e-3, 1.0, 37.0, 1e4][(i / 64) % 4]
        })
        .collect();
    x[256..288].fill(0.0);
    // Led by a negative value (f16's range ends at 65504; activations stay well inside it).
    x[600] = -6e4;
    x[1100] = -3e4;
    for kind in 0..4 {
        let got = engine_gpu::ggml_cpu_round(&engine, &x, k, kind).unwrap();
        let want = ggml_round(kind, &x);
        let block = engine_gpu::GGML_BLOCK[kind as usize] as usize;
        let mut exact = 0;
        for (i, (&(w, t), g)) in want.iter().zip(&got).enumerate() {
            exact += usize::from(w.to_bits() == g.to_bits());
            let quant = if kind < 2 {
                let b = &want[i / block * block..][..block];
                // A block's scale: its largest value over its largest quant.
                b.iter().fold(0f32, |m, &(w, _)| m.max(w.abs())) / 127.0
            } else {
                0.0
            };
            let near_half = ((t.abs().fract()) - 0.5).abs() < 1e-4;
            let tol = if near_half {
                quant * 1.01
            } else {
                8.0 * f32::EPSILON / 2.0 * w.abs()
            };
            assert!(
                if kind >= 2 {
                    w.to_bits() == g.to_bits()
                } else {
                    (w - g).abs() <= tol
                },
                "{} kind {kind} value {i} ({}): ggml {w:e}, ours {g:e}",
                label(&engine),
                x[i]
            );
        }
        eprintln!(
            "[generate] {} ggml activations kind {kind}: {exact} of {} values bit-exact",
            label(&engine),
            x.len()
        );
    }
}
gpu_test!(ggml_cpu_activations, ggml_cpu_activations_are_ggmls);

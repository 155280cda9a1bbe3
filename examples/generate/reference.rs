//! The forward pass on the CPU in f64: the reference the GPU's logits are checked against. The
//! same graph as `gpu.rs` (both read `Hparams`), every weight decoded by the CPU codecs
//! (`gguf_dequant::ops`: `get_rows`, and `mul_mat_f64` for every projection), every activation,
//! norm, RoPE angle, softmax and sum in f64. Teacher forced: the logits of every position.

use gguf_dequant::ops;

use crate::model::{Act, Model, ModelError, Rope};

/// `W x` for `n` rows of `x`, `w` a [K, N] tensor of the file: [n, N].
fn mul(model: &Model, name: &str, x: &[f64], n: usize) -> Result<Vec<f64>, ModelError> {
    let t = tensor(model, name)?;
    Ok(ops::mul_mat_f64(
        t.format,
        model.file.tensor_data(t),
        t.dims[0] as usize,
        x,
        n,
    )?)
}

fn tensor<'m>(
    model: &'m Model,
    name: &str,
) -> Result<&'m gguf_dequant::gguf::TensorInfo, ModelError> {
    model.file.tensor(name).ok_or_else(|| ModelError::Tensor {
        path: model.file.path().display().to_string(),
        name: name.into(),
        reason: "missing from the file".into(),
    })
}

/// A norm weight (F32, checked by `Model::open`), as f64.
fn vector(model: &Model, name: &str) -> Result<Vec<f64>, ModelError> {
    let t = tensor(model, name)?;
    Ok(
        gguf_dequant::cpu::dequant_f32(t.format, model.file.tensor_data(t))?
            .into_iter()
            .map(f64::from)
            .collect(),
    )
}

/// RMSNorm of each `d`-value row of `x`, times `w`.
pub fn rms_norm(x: &[f64], w: &[f64], d: usize, eps: f32) -> Vec<f64> {
    x.chunks_exact(d)
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
            let inv = 1.0 / (ms + f64::from(eps)).sqrt();
            row.iter().zip(w).map(move |(v, w)| v * inv * w)
        })
        .collect()
}

/// RoPE of `heads` heads per token, token t at position `pos0 + t`, angles of `base` in f64.
pub fn rope(
    x: &mut [f64],
    heads: usize,
    head_dim: usize,
    n_rot: usize,
    base: f32,
    pos0: usize,
    mode: Rope,
) {
    let half = n_rot / 2;
    for (t, token) in x.chunks_exact_mut(heads * head_dim).enumerate() {
        let p = (pos0 + t) as f64;
        for head in token.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let theta = p * f64::from(base).powf(-2.0 * i as f64 / n_rot as f64);
                let (s, c) = theta.sin_cos();
                let (a, b) = match mode {
                    Rope::Neox => (i, i + half),
                    Rope::Norm => (2 * i, 2 * i + 1),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * c - x1 * s;
                head[b] = x0 * s + x1 * c;
            }
        }
    }
}

/// The gated activation.
pub fn glu(gate: &mut [f64], up: &[f64], act: Act) {
    for (g, u) in gate.iter_mut().zip(up) {
        let a = match act {
            Act::Silu => *g / (1.0 + (-*g).exp()),
            Act::GeluTanh => {
                let sqrt_2_over_pi = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * *g * (1.0 + (sqrt_2_over_pi * *g * (1.0 + 0.044715 * *g * *g)).tanh())
            }
        };
        *g = a * u;
    }
}

/// The logits of every position of `tokens` (from position 0), `[n, n_vocab]`.
pub fn logits(model: &Model, tokens: &[u32]) -> Result<Vec<f64>, ModelError> {
    model.check_tokens(tokens, 0)?;
    let hp = &model.hp;
    let n = tokens.len();
    let (e, hd) = (hp.n_embd, hp.head_dim);
    let embd = tensor(model, "token_embd.weight")?;
    let mut x: Vec<f64> = ops::get_rows(embd.format, model.file.tensor_data(embd), e, tokens)?
        .into_iter()
        .map(|v| f64::from(v) * hp.embd_scale.map_or(1.0, f64::from))
        .collect();
    let group = hp.n_head / hp.n_head_kv;
    for il in 0..hp.n_layer {
        let l = |t: &str| format!("blk.{il}.{t}.weight");
        let layer = hp.layers[il];
        let xn = rms_norm(&x, &vector(model, &l("attn_norm"))?, e, hp.eps);
        let mut q = mul(model, &l("attn_q"), &xn, n)?;
        let mut k = mul(model, &l("attn_k"), &xn, n)?;
        let v = mul(model, &l("attn_v"), &xn, n)?;
        if hp.qk_norm {
            q = rms_norm(&q, &vector(model, &l("attn_q_norm"))?, hd, hp.eps);
            k = rms_norm(&k, &vector(model, &l("attn_k_norm"))?, hd, hp.eps);
        }
        rope(&mut q, hp.n_head, hd, hp.n_rot, layer.rope_base, 0, hp.rope);
        rope(
            &mut k,
            hp.n_head_kv,
            hd,
            hp.n_rot,
            layer.rope_base,
            0,
            hp.rope,
        );
        let kv = hp.kv_dim();
        let mut att = vec![0.0f64; n * hp.q_dim()];
        for t in 0..n {
            let lo = layer
                .window
                .map_or(0, |w| (t + 1).saturating_sub(w as usize));
            for h in 0..hp.n_head {
                let kvh = h / group;
                let qv = &q[(t * hp.n_head + h) * hd..][..hd];
                let scores: Vec<f64> = (lo..=t)
                    .map(|j| {
                        let kj = &k[j * kv + kvh * hd..][..hd];
                        qv.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>() * f64::from(hp.q_scale)
                    })
                    .collect();
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let ex: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let sum: f64 = ex.iter().sum();
                let out = &mut att[(t * hp.n_head + h) * hd..][..hd];
                for (jj, w) in ex.iter().enumerate() {
                    let vj = &v[(lo + jj) * kv + kvh * hd..][..hd];
                    for (o, vv) in out.iter_mut().zip(vj) {
                        *o += w / sum * vv;
                    }
                }
            }
        }
        let mut o = mul(model, &l("attn_output"), &att, n)?;
        if hp.post_norms {
            o = rms_norm(&o, &vector(model, &l("post_attention_norm"))?, e, hp.eps);
        }
        x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
        let xn = rms_norm(&x, &vector(model, &l("ffn_norm"))?, e, hp.eps);
        let mut gate = mul(model, &l("ffn_gate"), &xn, n)?;
        let up = mul(model, &l("ffn_up"), &xn, n)?;
        glu(&mut gate, &up, hp.act);
        let mut d = mul(model, &l("ffn_down"), &gate, n)?;
        if hp.post_norms {
            d = rms_norm(&d, &vector(model, &l("post_ffw_norm"))?, e, hp.eps);
        }
        x.iter_mut().zip(&d).for_each(|(a, b)| *a += b);
    }
    let xn = rms_norm(&x, &vector(model, "output_norm.weight")?, e, hp.eps);
    mul(model, &hp.output, &xn, n)
}

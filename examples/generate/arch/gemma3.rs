//! `gemma3` (Gemma 3): the embedding scaled by `sqrt(n_embd)`, RMSNorm of each head of q and k
//! before RoPE (NEOX), the attention and FFN outputs normed again before the residual add, GeGLU
//! (tanh approximation), q scaled by `1 / sqrt(key_length)`; five sliding-window layers (window
//! `{arch}.attention.sliding_window`, RoPE base `{arch}.rope.freq_base_swa`, 10 000 by default)
//! to each global one (`{arch}.attention.sliding_window_pattern`, default 6), as llama.cpp's
//! `src/models/gemma3.cpp` builds it.

use crate::model::{Act, Hparams, Meta, ModelError, Rope};

/// gemma3's choices.
pub fn configure(meta: &Meta<'_>, hp: &mut Hparams) -> Result<(), ModelError> {
    hp.act = Act::GeluTanh;
    hp.rope = Rope::Neox;
    hp.embd_scale = Some((hp.n_embd as f32).sqrt());
    hp.qk_norm = true;
    hp.post_norms = true;
    hp.q_scale = 1.0 / (hp.head_dim as f32).sqrt();
    if meta.f32_or("{arch}.final_logit_softcapping", 0.0)? > 0.0 {
        return Err(meta.unsupported("final logit soft-capping"));
    }
    let window = meta.u64_or("{arch}.attention.sliding_window", 0)?;
    if window > 0 {
        let pattern = meta
            .u64_or("{arch}.attention.sliding_window_pattern", 6)?
            .max(1) as usize;
        let swa_base = meta.f32_or("{arch}.rope.freq_base_swa", 10_000.0)?;
        for (il, layer) in hp.layers.iter_mut().enumerate() {
            // llama.cpp's set_swa_pattern: every layer but each `pattern`-th is windowed.
            if il % pattern < pattern - 1 {
                layer.window = Some(window as u32);
                layer.rope_base = swa_base;
            }
        }
    }
    Ok(())
}

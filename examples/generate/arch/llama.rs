//! `llama` (Llama 2/3, SmolLM2, …): pre-norm blocks, SwiGLU, RoPE of ggml's NORM kind (the GGUF
//! converter permutes q and k for it), q scaled by `1 / sqrt(head_dim)`, every layer attending to
//! every earlier position.

use crate::model::{Act, Hparams, Meta, ModelError, Rope};

/// llama's choices: the defaults of `model::hparams`.
pub fn configure(_meta: &Meta<'_>, hp: &mut Hparams) -> Result<(), ModelError> {
    hp.act = Act::Silu;
    hp.rope = Rope::Norm;
    Ok(())
}

//! A decoder-only transformer as the file describes it: its hyperparameters, read from the
//! metadata (`{arch}.block_count`, `.embedding_length`, …), and the architecture's choices, from
//! one file per architecture (`arch/llama.rs`, `arch/gemma3.rs`). The GPU engine (`gpu.rs`) and
//! the f64 CPU reference (`reference.rs`) both run this description, so they compute the same
//! graph by construction.

use std::path::Path;

use gguf_dequant::gguf::Value;
use gguf_dequant::{GgufFile, Selection};

use crate::arch;

/// What can go wrong with a model, each a one-line message naming what and where.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The file (missing, truncated, not GGUF), or the GPU (no adapter, out of memory, lost).
    #[error(transparent)]
    Library(#[from] gguf_dequant::Error),
    /// `general.architecture` names one this engine does not run.
    #[error(
        "{path}: architecture `{arch}` is not supported (supported: {})",
        arch::names()
    )]
    UnknownArch {
        /// The file.
        path: String,
        /// The architecture it names.
        arch: String,
    },
    /// A metadata key the architecture needs is missing or of the wrong type.
    #[error("{path}: metadata key {key} is missing or not {want}")]
    Key {
        /// The file.
        path: String,
        /// The key.
        key: String,
        /// The type it must have.
        want: &'static str,
    },
    /// A tensor the architecture needs is missing or has the wrong shape.
    #[error("{path}: tensor {name}: {reason}")]
    Tensor {
        /// The file.
        path: String,
        /// The tensor.
        name: String,
        /// Missing, or its dims.
        reason: String,
    },
    /// Hyperparameters that do not fit together.
    #[error("{path}: {reason}")]
    Shape {
        /// The file.
        path: String,
        /// What does not fit.
        reason: String,
    },
    /// The tokens asked for do not fit the model.
    #[error("{0}")]
    Input(String),
}

impl From<gguf_dequant::gpu::GpuError> for ModelError {
    fn from(e: gguf_dequant::gpu::GpuError) -> ModelError {
        ModelError::Library(e.into())
    }
}

/// The activation of the gated feed-forward network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// `silu(gate) · up` (SwiGLU).
    Silu,
    /// `gelu_tanh(gate) · up` (GeGLU, ggml's tanh approximation).
    GeluTanh,
}

/// How RoPE pairs the values of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rope {
    /// ggml's NORM: values `2i` and `2i + 1`.
    Norm,
    /// ggml's NEOX: values `i` and `i + d / 2`.
    Neox,
}

/// One layer's attention: RoPE base and the sliding window (`None`: every earlier position).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerAttn {
    /// RoPE frequency base.
    pub rope_base: f32,
    /// Keys at most this many positions back, the query's own included (ggml: masked when
    /// `p_query - p_key >= window`).
    pub window: Option<u32>,
}

/// Everything the forward pass needs to know besides the weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Hparams {
    /// `general.architecture`.
    pub arch: String,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Values per head (K and V).
    pub head_dim: usize,
    /// Values of a head that RoPE rotates (from its start).
    pub n_rot: usize,
    pub n_vocab: usize,
    /// The context the model was trained on: the longest sequence this engine runs.
    pub n_ctx: usize,
    pub eps: f32,
    pub act: Act,
    pub rope: Rope,
    /// Per layer.
    pub layers: Vec<LayerAttn>,
    /// Multiplies the query before the dot products (`1 / sqrt(head_dim)`, or the arch's).
    pub q_scale: f32,
    /// Multiplies the embedding (gemma: `sqrt(n_embd)`).
    pub embd_scale: Option<f32>,
    /// RMSNorm of each head of q and k before RoPE (`attn_q_norm`, `attn_k_norm`).
    pub qk_norm: bool,
    /// RMSNorm of the attention and FFN outputs before the residual add (`attn_post_norm`,
    /// `ffn_post_norm`).
    pub post_norms: bool,
    /// The output head: `output.weight`, or the token embedding when the file has none.
    pub output: String,
}

impl Hparams {
    /// Values of K (and V) per token: `n_head_kv · head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Values of Q per token: `n_head · head_dim`.
    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }
}

/// Reads typed metadata of one file, naming the file and key in errors.
pub struct Meta<'f> {
    file: &'f GgufFile,
    arch: String,
}

impl<'f> Meta<'f> {
    fn path(&self) -> String {
        self.file.path().display().to_string()
    }

    fn key(&self, key: &str, want: &'static str) -> ModelError {
        ModelError::Key {
            path: self.path(),
            key: key.replace("{arch}", &self.arch),
            want,
        }
    }

    fn value(&self, key: &str) -> Option<&'f Value> {
        self.file.get(&key.replace("{arch}", &self.arch))
    }

    /// An unsigned integer key.
    pub fn u64(&self, key: &str) -> Result<u64, ModelError> {
        self.value(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| self.key(key, "an unsigned integer"))
    }

    /// An unsigned integer key, or `default` when absent.
    pub fn u64_or(&self, key: &str, default: u64) -> Result<u64, ModelError> {
        match self.value(key) {
            None => Ok(default),
            Some(_) => self.u64(key),
        }
    }

    /// A float key.
    pub fn f32(&self, key: &str) -> Result<f32, ModelError> {
        self.value(key)
            .and_then(Value::as_f64)
            .map(|v| v as f32)
            .ok_or_else(|| self.key(key, "a number"))
    }

    /// A float key, or `default` when absent.
    pub fn f32_or(&self, key: &str, default: f32) -> Result<f32, ModelError> {
        match self.value(key) {
            None => Ok(default),
            Some(_) => self.f32(key),
        }
    }

    /// A feature of the architecture that this engine does not run.
    pub fn unsupported(&self, what: &str) -> ModelError {
        ModelError::Shape {
            path: self.path(),
            reason: format!("{} with {what} is not supported", self.arch),
        }
    }

    /// A positive count (usize).
    pub fn count(&self, key: &str) -> Result<usize, ModelError> {
        let v = self.u64(key)?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v > 0 && v <= 1 << 24)
            .ok_or_else(|| self.key(key, "a positive count up to 2^24"))
    }
}

/// A model: its file and hyperparameters.
pub struct Model {
    pub file: GgufFile,
    pub hp: Hparams,
}

impl Model {
    /// Opens `path` and reads its hyperparameters; checks that every tensor the architecture
    /// needs is there with the right shape.
    pub fn open(path: &Path) -> Result<Model, ModelError> {
        let file = GgufFile::open(path)?;
        let hp = hparams(&file)?;
        let model = Model { file, hp };
        for (name, dims) in model.tensors() {
            model.check_tensor(&name, &dims)?;
        }
        Ok(model)
    }

    /// Every tensor the forward pass reads, with the dims it must have (ggml order).
    pub fn tensors(&self) -> Vec<(String, Vec<u64>)> {
        let h = &self.hp;
        let (e, f, q, kv, hd) = (
            h.n_embd as u64,
            h.n_ff as u64,
            h.q_dim() as u64,
            h.kv_dim() as u64,
            h.head_dim as u64,
        );
        let mut t = vec![
            ("token_embd.weight".to_string(), vec![e, h.n_vocab as u64]),
            ("output_norm.weight".to_string(), vec![e]),
        ];
        if h.output != "token_embd.weight" {
            t.push((h.output.clone(), vec![e, h.n_vocab as u64]));
        }
        for il in 0..h.n_layer {
            let l = |n: &str| format!("blk.{il}.{n}.weight");
            t.extend([
                (l("attn_norm"), vec![e]),
                (l("attn_q"), vec![e, q]),
                (l("attn_k"), vec![e, kv]),
                (l("attn_v"), vec![e, kv]),
                (l("attn_output"), vec![q, e]),
                (l("ffn_norm"), vec![e]),
                (l("ffn_gate"), vec![e, f]),
                (l("ffn_up"), vec![e, f]),
                (l("ffn_down"), vec![f, e]),
            ]);
            if h.qk_norm {
                t.extend([(l("attn_q_norm"), vec![hd]), (l("attn_k_norm"), vec![hd])]);
            }
            if h.post_norms {
                t.extend([
                    (l("post_attention_norm"), vec![e]),
                    (l("post_ffw_norm"), vec![e]),
                ]);
            }
        }
        t
    }

    fn check_tensor(&self, name: &str, dims: &[u64]) -> Result<(), ModelError> {
        let err = |reason: String| ModelError::Tensor {
            path: self.file.path().display().to_string(),
            name: name.to_string(),
            reason,
        };
        let t = self
            .file
            .tensor(name)
            .ok_or_else(|| err("missing from the file".into()))?;
        if t.dims != dims {
            return Err(err(format!("has dims {:?}, {dims:?} expected", t.dims)));
        }
        if dims.len() == 1 && t.format != gguf_dequant::Format::F32 {
            return Err(err(format!("is {}, a norm weight must be F32", t.format)));
        }
        if dims.len() > 1 && !t.format.has_shader() {
            return Err(err(format!("is {}, which has no GPU shader", t.format)));
        }
        Ok(())
    }

    /// The selection of every tensor the forward pass reads.
    pub fn selection(&self) -> Selection {
        Selection::names(self.tensors().into_iter().map(|(n, _)| n))
    }

    /// Checks `tokens` (ids, positions from 0) against the vocabulary and the context.
    pub fn check_tokens(&self, tokens: &[u32], extra: usize) -> Result<(), ModelError> {
        if let Some((i, &t)) = tokens
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= self.hp.n_vocab)
        {
            return Err(ModelError::Input(format!(
                "token id {t} at position {i} is not below the vocabulary's {} tokens",
                self.hp.n_vocab
            )));
        }
        if tokens.is_empty() {
            return Err(ModelError::Input("no tokens".into()));
        }
        if tokens.len() + extra > self.hp.n_ctx {
            return Err(ModelError::Input(format!(
                "{} prompt tokens + {extra} to generate pass the context of {} tokens",
                tokens.len(),
                self.hp.n_ctx
            )));
        }
        Ok(())
    }
}

/// The hyperparameters of `file`: the common keys, then the architecture's own choices.
pub fn hparams(file: &GgufFile) -> Result<Hparams, ModelError> {
    let path = file.path().display().to_string();
    let arch = file
        .get("general.architecture")
        .and_then(Value::as_str)
        .ok_or_else(|| ModelError::Key {
            path: path.clone(),
            key: "general.architecture".into(),
            want: "a string",
        })?
        .to_string();
    let Some(configure) = arch::find(&arch) else {
        return Err(ModelError::UnknownArch { path, arch });
    };
    let meta = Meta {
        file,
        arch: arch.clone(),
    };
    let n_embd = meta.count("{arch}.embedding_length")?;
    let n_head = meta.count("{arch}.attention.head_count")?;
    let n_head_kv = meta.u64_or("{arch}.attention.head_count_kv", n_head as u64)? as usize;
    if n_head_kv == 0 || !n_head.is_multiple_of(n_head_kv) {
        return Err(ModelError::Shape {
            path,
            reason: format!("{n_head} query heads are not a multiple of {n_head_kv} KV heads"),
        });
    }
    let head_dim = meta.u64_or("{arch}.attention.key_length", (n_embd / n_head) as u64)? as usize;
    let v_dim = meta.u64_or("{arch}.attention.value_length", head_dim as u64)? as usize;
    let n_rot = meta.u64_or("{arch}.rope.dimension_count", head_dim as u64)? as usize;
    if head_dim == 0 || v_dim != head_dim || n_rot > head_dim || !n_rot.is_multiple_of(2) {
        return Err(ModelError::Shape {
            path,
            reason: format!(
                "heads of {head_dim} keys, {v_dim} values and {n_rot} rotated: this engine takes \
                 equal key and value heads and an even rotation inside them"
            ),
        });
    }
    let embd = file
        .tensor("token_embd.weight")
        .ok_or_else(|| ModelError::Tensor {
            path: path.clone(),
            name: "token_embd.weight".into(),
            reason: "missing from the file".into(),
        })?;
    let n_vocab = embd.dims.get(1).copied().unwrap_or(0) as usize;
    let n_layer = meta.count("{arch}.block_count")?;
    let rope_base = meta.f32_or("{arch}.rope.freq_base", 10_000.0)?;
    let mut hp = Hparams {
        arch: arch.clone(),
        n_layer,
        n_embd,
        n_ff: meta.count("{arch}.feed_forward_length")?,
        n_head,
        n_head_kv,
        head_dim,
        n_rot,
        n_vocab,
        n_ctx: meta.count("{arch}.context_length")?,
        eps: meta.f32("{arch}.attention.layer_norm_rms_epsilon")?,
        act: Act::Silu,
        rope: Rope::Norm,
        layers: vec![
            LayerAttn {
                rope_base,
                window: None,
            };
            n_layer
        ],
        q_scale: 1.0 / (head_dim as f32).sqrt(),
        embd_scale: None,
        qk_norm: false,
        post_norms: false,
        output: if file.tensor("output.weight").is_some() {
            "output.weight".into()
        } else {
            "token_embd.weight".into()
        },
    };
    configure(&meta, &mut hp)?;
    Ok(hp)
}

//! The model's own tokenizer, from its GGUF vocabulary (`tokenizer.ggml.*`): a Hugging Face
//! `tokenizers` BPE built from the tokens and merges (`gpt2`: byte-level pieces, split first into
//! single digits and then by the GPT-2 pattern, as llama.cpp's `smollm` pre-tokenizer does) or
//! from the tokens and scores (`llama`: SentencePiece-style pieces with `▁` for spaces, each merge
//! ranked by its result's score, unknown characters as byte tokens, as llama.cpp's SPM tokenizer
//! merges). The control, unknown and user-defined tokens match as themselves in the text, first,
//! as llama.cpp does with `parse_special`; BOS and EOS are added as the file says.
//!
//! Detokenisation is llama.cpp's `llama_detokenize` without removing BOS/EOS and without
//! rendering specials: control and unknown tokens give nothing, user-defined ones their text,
//! byte tokens their byte, normal ones their piece (byte-level decoded, or `▁` as a space).

use gguf_dequant::gguf::{Array, Value};
use gguf_dequant::GgufFile;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::replace::Replace;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

/// What can go wrong building or using a tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A `tokenizer.ggml.*` key is missing or of the wrong type.
    #[error("{path}: tokenizer metadata {key} is missing or not {want}")]
    Key {
        /// The file.
        path: String,
        /// The key.
        key: &'static str,
        /// What it must be.
        want: &'static str,
    },
    /// A tokenizer model this engine does not build.
    #[error("{path}: tokenizer model `{model}` is not supported (gpt2 and llama are)")]
    Model {
        /// The file.
        path: String,
        /// `tokenizer.ggml.model`.
        model: String,
    },
    /// The `tokenizers` crate refused the vocabulary or the text.
    #[error("{path}: tokenizer: {reason}")]
    Build {
        /// The file.
        path: String,
        /// Its message.
        reason: String,
    },
}

/// GGUF's token types (`tokenizer.ggml.token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Byte,
}

impl Kind {
    fn from_gguf(t: i64) -> Kind {
        match t {
            2 => Kind::Unknown,
            3 => Kind::Control,
            4 => Kind::UserDefined,
            6 => Kind::Byte,
            // 1 normal; 5 unused and anything else read as normal pieces, as llama.cpp's
            // detokeniser does with the NORMAL attribute.
            _ => Kind::Normal,
        }
    }

    fn special(self) -> bool {
        matches!(self, Kind::Unknown | Kind::Control | Kind::UserDefined)
    }
}

/// A model's tokenizer.
pub struct Tok {
    inner: Tokenizer,
    tokens: Vec<String>,
    kinds: Vec<Kind>,
    byte_level: bool,
    /// Token ids added in front and behind.
    bos: Option<u32>,
    eos_added: Option<u32>,
    /// The end-of-sequence ids generation stops at.
    pub eos: Vec<u32>,
}

fn strings(a: &Array) -> Option<Vec<String>> {
    match a {
        Array::String(v) => Some(v.iter().map(|s| s.to_string_lossy().into_owned()).collect()),
        _ => None,
    }
}

fn ints(a: &Array) -> Option<Vec<i64>> {
    a.iter().map(|v| v.as_i64()).collect()
}

fn floats(a: &Array) -> Option<Vec<f64>> {
    a.iter().map(|v| v.as_f64()).collect()
}

impl Tok {
    /// The tokenizer of `file`.
    pub fn from_gguf(file: &GgufFile) -> Result<Tok, TokenizerError> {
        let path = file.path().display().to_string();
        let key = |key: &'static str, want: &'static str| TokenizerError::Key {
            path: path.clone(),
            key,
            want,
        };
        let array = |k: &'static str| file.get(k).and_then(Value::as_array);
        let model = file
            .get("tokenizer.ggml.model")
            .and_then(Value::as_str)
            .ok_or_else(|| key("tokenizer.ggml.model", "a string"))?
            .to_string();
        let tokens = array("tokenizer.ggml.tokens")
            .and_then(strings)
            .ok_or_else(|| key("tokenizer.ggml.tokens", "an array of strings"))?;
        let kinds: Vec<Kind> = match array("tokenizer.ggml.token_type") {
            Some(a) => ints(a)
                .filter(|v| v.len() == tokens.len())
                .ok_or_else(|| key("tokenizer.ggml.token_type", "one integer per token"))?
                .into_iter()
                .map(Kind::from_gguf)
                .collect(),
            None => vec![Kind::Normal; tokens.len()],
        };
        let id = |k: &'static str| file.get(k).and_then(Value::as_u64).map(|v| v as u32);
        let flag = |k: &'static str| file.get(k).and_then(Value::as_bool);
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let build = |e: tokenizers::Error| TokenizerError::Build {
            path: path.clone(),
            reason: e.to_string(),
        };
        let (mut inner, byte_level, add_bos_default) = match model.as_str() {
            "gpt2" => {
                let merges: Vec<(String, String)> = array("tokenizer.ggml.merges")
                    .and_then(strings)
                    .ok_or_else(|| key("tokenizer.ggml.merges", "an array of strings"))?
                    .iter()
                    .filter_map(|m| {
                        m.split_once(' ')
                            .map(|(a, b)| (a.to_string(), b.to_string()))
                    })
                    .collect();
                let bpe = BPE::builder()
                    .vocab_and_merges(vocab, merges)
                    .build()
                    .map_err(build)?;
                let mut t = Tokenizer::new(bpe);
                t.with_pre_tokenizer(Some(Sequence::new(vec![
                    Digits::new(true).into(),
                    ByteLevel::new(false, false, true).into(),
                ])));
                (t, true, false)
            }
            "llama" => {
                let scores = array("tokenizer.ggml.scores")
                    .and_then(floats)
                    .filter(|v| v.len() == tokens.len())
                    .ok_or_else(|| key("tokenizer.ggml.scores", "one number per token"))?;
                let merges = merges_from_scores(&tokens, &kinds, &scores, &vocab);
                let mut b = BPE::builder()
                    .vocab_and_merges(vocab, merges)
                    .byte_fallback(true);
                if let Some(unk) = id("tokenizer.ggml.unknown_token_id") {
                    if let Some(t) = tokens.get(unk as usize) {
                        b = b.unk_token(t.clone());
                    }
                }
                let mut t = Tokenizer::new(b.build().map_err(build)?);
                t.with_normalizer(Some(Replace::new(" ", "\u{2581}").map_err(build)?))
                    .map_err(build)?;
                (t, false, true)
            }
            _ => return Err(TokenizerError::Model { path, model }),
        };
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(&kinds)
            .filter(|(_, k)| k.special())
            .map(|(t, _)| AddedToken::from(t.clone(), true))
            .collect();
        inner.add_special_tokens(specials).map_err(build)?;
        let bos = id("tokenizer.ggml.bos_token_id");
        let eos = id("tokenizer.ggml.eos_token_id");
        let add_bos = flag("tokenizer.ggml.add_bos_token").unwrap_or(add_bos_default);
        let add_eos = flag("tokenizer.ggml.add_eos_token").unwrap_or(false);
        // Generation also stops at the end-of-turn tokens of the chat formats.
        let mut stop: Vec<u32> = eos.into_iter().collect();
        for name in ["<|im_end|>", "<end_of_turn>", "<|endoftext|>", "<|eot_id|>"] {
            if let Some(i) = tokens.iter().position(|t| t == name) {
                if !stop.contains(&(i as u32)) {
                    stop.push(i as u32);
                }
            }
        }
        Ok(Tok {
            inner,
            tokens,
            kinds,
            byte_level,
            bos: bos.filter(|_| add_bos),
            eos_added: eos.filter(|_| add_eos),
            eos: stop,
        })
    }

    /// The ids of `text`, BOS (and EOS) added as the file says.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| TokenizerError::Build {
                path: "text".into(),
                reason: e.to_string(),
            })?;
        let mut ids: Vec<u32> = self.bos.into_iter().collect();
        ids.extend_from_slice(enc.get_ids());
        ids.extend(self.eos_added);
        Ok(ids)
    }

    /// The bytes of one token, as llama.cpp's `token_to_piece(special = false)` gives them.
    pub fn piece(&self, id: u32) -> Vec<u8> {
        let (Some(t), Some(k)) = (self.tokens.get(id as usize), self.kinds.get(id as usize)) else {
            return Vec::new();
        };
        match k {
            Kind::Control | Kind::Unknown => Vec::new(),
            Kind::UserDefined => t.as_bytes().to_vec(),
            Kind::Byte => byte_token(t).map_or_else(|| t.as_bytes().to_vec(), |b| vec![b]),
            Kind::Normal if self.byte_level => t.chars().filter_map(byte_of_char).collect(),
            Kind::Normal => t.replace('\u{2581}', " ").into_bytes(),
        }
    }

    /// The text of `ids` (llama.cpp's `llama_detokenize`, nothing removed, specials not
    /// rendered); invalid UTF-8 as U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&i| self.piece(i)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// `<0xAB>` → 0xAB.
fn byte_token(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's byte-level alphabet, inverted: the byte a piece's character stands for.
fn byte_of_char(c: char) -> Option<u8> {
    let c = c as u32;
    // Printable bytes stand for themselves; the other 68 are mapped to U+0100 onwards, in order.
    let printable =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    if c < 256 && printable(c) {
        return Some(c as u8);
    }
    let mut n = 256;
    for b in 0..256u32 {
        if !printable(b) {
            if n == c {
                return Some(b as u8);
            }
            n += 1;
        }
    }
    None
}

/// SentencePiece's BPE as merges: every way a normal token splits into two tokens of the
/// vocabulary, ranked by the token's score, highest first (ties: the lower id first).
fn merges_from_scores(
    tokens: &[String],
    kinds: &[Kind],
    scores: &[f64],
    vocab: &Vocab,
) -> Vec<(String, String)> {
    let mut ranked: Vec<(f64, u32, usize, &str, &str)> = Vec::new();
    for (id, t) in tokens.iter().enumerate() {
        if kinds[id] != Kind::Normal || t.chars().count() < 2 {
            continue;
        }
        for (at, _) in t.char_indices().skip(1) {
            let (a, b) = t.split_at(at);
            if let (Some(&ia), Some(&ib)) = (vocab.get(a), vocab.get(b)) {
                let normal = |i: u32| kinds[i as usize] == Kind::Normal;
                if normal(ia) && normal(ib) {
                    ranked.push((scores[id], id as u32, at, a, b));
                }
            }
        }
    }
    ranked.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    ranked
        .into_iter()
        .map(|(_, _, _, a, b)| (a.to_string(), b.to_string()))
        .collect()
}

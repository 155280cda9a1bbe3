//! examples/generate's refusals, each a typed error with a one-line message naming what and
//! where, never a panic: a truncated and a corrupt model, an architecture it does not run, a
//! missing tensor, a tensor of the wrong shape, a prompt longer than the context and a token id
//! past the vocabulary. Small llama files are written here with the library's writer.

use gguf_dequant::gguf::GgufWriter;
use gguf_dequant::Format;

use crate::model::{Model, ModelError};
use crate::support;

const E: u64 = 64;

/// A tiny llama: 1 layer, 64-value embedding, 2 heads, vocabulary of 32, context 16; F32 weights
/// of zeros. `skip` leaves a tensor out, `arch` replaces the architecture.
fn tiny(
    dir: &std::path::Path,
    arch: &str,
    skip: Option<&str>,
    ffn_rows: u64,
) -> std::path::PathBuf {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", arch);
    for (k, v) in [
        ("block_count", 1u32),
        ("embedding_length", E as u32),
        ("feed_forward_length", 128),
        ("attention.head_count", 2),
        ("context_length", 16),
    ] {
        w.metadata(format!("{arch}.{k}"), v);
    }
    w.metadata(format!("{arch}.attention.layer_norm_rms_epsilon"), 1e-5f32);
    let t = |w: &mut GgufWriter, name: &str, dims: Vec<u64>| {
        if Some(name) != skip {
            let n: u64 = dims.iter().product();
            w.tensor(name, dims, Format::F32, vec![0u8; 4 * n as usize]);
        }
    };
    t(&mut w, "token_embd.weight", vec![E, 32]);
    t(&mut w, "output_norm.weight", vec![E]);
    for n in ["attn_norm", "ffn_norm"] {
        t(&mut w, &format!("blk.0.{n}.weight"), vec![E]);
    }
    for n in ["attn_q", "attn_k", "attn_v", "attn_output"] {
        t(&mut w, &format!("blk.0.{n}.weight"), vec![E, E]);
    }
    t(&mut w, "blk.0.ffn_gate.weight", vec![E, ffn_rows]);
    t(&mut w, "blk.0.ffn_up.weight", vec![E, 128]);
    t(&mut w, "blk.0.ffn_down.weight", vec![128, E]);
    let path = dir.join(format!("{arch}-{}.gguf", skip.unwrap_or("whole")));
    std::fs::write(&path, w.to_bytes()).unwrap();
    path
}

fn one_line(e: &ModelError, needle: &str) {
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(msg.contains(needle), "`{needle}` not in: {msg}");
}

#[test]
fn bad_models_and_inputs_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    // A well-formed tiny model opens, and its inputs are checked.
    let good = Model::open(&tiny(dir.path(), "llama", None, 128)).unwrap();
    assert_eq!(
        (good.hp.n_layer, good.hp.n_vocab, good.hp.head_dim),
        (1, 32, 32)
    );
    assert_eq!(good.hp.output, "token_embd.weight", "tied output head");
    good.check_tokens(&[0, 31], 14).unwrap();
    one_line(
        &good.check_tokens(&[3, 32], 0).unwrap_err(),
        "token id 32 at position 1",
    );
    one_line(
        &good.check_tokens(&[1; 10], 7).unwrap_err(),
        "pass the context of 16 tokens",
    );
    one_line(&good.check_tokens(&[], 1).unwrap_err(), "no tokens");
    // The architecture, a missing tensor, a wrong shape.
    let e = Model::open(&tiny(dir.path(), "mamba", None, 128))
        .err()
        .unwrap();
    assert!(matches!(e, ModelError::UnknownArch { .. }), "{e}");
    one_line(
        &e,
        "architecture `mamba` is not supported (supported: llama, gemma3)",
    );
    let e = Model::open(&tiny(dir.path(), "llama", Some("blk.0.attn_v.weight"), 128))
        .err()
        .unwrap();
    one_line(&e, "tensor blk.0.attn_v.weight: missing from the file");
    let e = Model::open(&tiny(dir.path(), "llama", None, 96))
        .err()
        .unwrap();
    one_line(
        &e,
        "blk.0.ffn_gate.weight: has dims [64, 96], [64, 128] expected",
    );
    // A truncated file and one that is not GGUF.
    let whole = std::fs::read(tiny(dir.path(), "llama", None, 128)).unwrap();
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let e = Model::open(&cut).err().unwrap();
    assert!(matches!(e, ModelError::Library(_)), "{e}");
    one_line(&e, "cut.gguf");
    let junk = dir.path().join("junk.gguf");
    std::fs::write(&junk, b"this is not a model").unwrap();
    one_line(&Model::open(&junk).err().unwrap(), "junk.gguf");
    let e = Model::open(&dir.path().join("none.gguf")).err().unwrap();
    one_line(&e, "none.gguf");
}

/// Both real models: their hyperparameters as the files say, each tensor the forward pass needs.
#[test]
fn real_models_read_their_hyperparameters() {
    for name in support::MODEL_FILES {
        let Some(path) = support::model_file("generate_hparams", name) else {
            return;
        };
        let m = Model::open(&path).unwrap();
        let h = &m.hp;
        match h.arch.as_str() {
            "llama" => {
                assert_eq!(
                    (h.n_layer, h.n_embd, h.n_head, h.n_head_kv, h.head_dim),
                    (30, 576, 9, 3, 64)
                );
                assert!(h
                    .layers
                    .iter()
                    .all(|l| l.window.is_none() && l.rope_base == 100_000.0));
            }
            "gemma3" => {
                assert_eq!(
                    (h.n_layer, h.n_embd, h.n_head, h.n_head_kv, h.head_dim),
                    (18, 640, 4, 1, 256)
                );
                let windowed = h.layers.iter().filter(|l| l.window == Some(512)).count();
                assert_eq!(windowed, 15, "five windowed layers to each global one");
                assert!(h.layers[5].window.is_none() && h.layers[5].rope_base == 1e6);
                assert_eq!(h.layers[0].rope_base, 10_000.0);
                assert!(h.qk_norm && h.post_norms && h.embd_scale.is_some());
            }
            other => panic!("{other}"),
        }
        assert_eq!(h.output, "token_embd.weight", "{name}: tied output head");
    }
}

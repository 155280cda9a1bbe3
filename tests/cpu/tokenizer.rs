//! examples/generate's tokenizer (the model's own vocabulary, through the `tokenizers` crate) on
//! both real models against llama.cpp's: the ids of every string of `tests/corpus/tokenizer.json`
//! (spaces, digits, accents, emoji, newlines, tabs, other scripts, each model's chat tokens; made
//! by `scripts/peers/tokenizer_fixtures.py` from llama.cpp's `llama_tokenize` with `add_special`
//! and `parse_special`) and their text back (`llama_detokenize`).

use gguf_dequant::GgufFile;
use serde_json::Value;

use crate::support;
use crate::tokenizer::Tok;

#[test]
fn ids_and_text_are_llama_cpps() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/tokenizer.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for (model, cases) in fixture["models"].as_object().unwrap() {
        let Some(file) = support::model_file("tokenizer_ids_and_text", model) else {
            return;
        };
        let tok = Tok::from_gguf(&GgufFile::open(&file).unwrap()).unwrap();
        let cases = cases.as_array().unwrap();
        assert!(cases.len() >= 15, "{model}");
        let mut failures = Vec::new();
        for c in cases {
            let text = c["text"].as_str().unwrap();
            let want: Vec<u32> = c["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let got = tok.encode(text).unwrap();
            if got != want {
                failures.push(format!(
                    "{model} encode {text:?}:\n  ours  {got:?}\n  llama {want:?}"
                ));
            }
            let back = tok.decode(&want);
            if back != c["detokenized"].as_str().unwrap() {
                failures.push(format!(
                    "{model} decode {want:?}: {back:?}, llama.cpp {:?}",
                    c["detokenized"]
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        eprintln!(
            "[tokenizer] {model}: {} strings, ids and text as llama.cpp's",
            cases.len()
        );
    }
}

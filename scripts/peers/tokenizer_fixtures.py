#!/usr/bin/env python3
"""llama.cpp's token ids (and its detokenisation of them) for a set of strings on both real models:
the fixture `tests/corpus/tokenizer.json` the tokenizer test of examples/generate compares with.

Usage: python3 scripts/peers/tokenizer_fixtures.py [MODELS_DIR] > tests/corpus/tokenizer.json

MODELS_DIR defaults to ~/.cache/gguf-dequant/models (what scripts/test.sh downloads). Runs
`scripts/peers/llama-vulkan.sh oracle tokenize|detokenize` (llama.cpp from the llama-cpp-python
0.3.36 sdist; it builds itself on first use): ids with add_special and parse_special, as llama-cli
tokenizes a prompt; text with neither BOS/EOS removed nor special tokens rendered.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]

# Spaces, digits, accents, emoji, newlines, tabs, punctuation, contractions, other scripts, and each
# model's own control tokens in text.
TEXTS = [
    "Hello world",
    "Hello world 123",
    "  two leading spaces and two trailing  ",
    "multiple    spaces\tand\ttabs",
    "line one\nline two\n\nafter a blank line\r\nwindows",
    "digits: 0 7 42 1234567890 3.14159 -12,500.75 2026-12-01",
    "accents: café naïve résumé Ångström São Paulo Zürich crème brûlée",
    "emoji: 🙂 👍🏽 🇫🇷 👨‍👩‍👧 ❤️ 🚀🚀",
    "it's we're they've I'm you'll he'd 'quoted' \"double\"",
    "mixed scripts: Привет мир, こんにちは世界, 你好，世界, مرحبا بالعالم, नमस्ते",
    "punctuation!!! ??? ... --- (parens) [brackets] {braces} <angles> @#$%^&*_+=|\\/~`",
    "code: fn main() { println!(\"{}\", x[0] + 1); } // done",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "",
    " ",
    "\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "ümlaut at start, and a trailing newline\n",
]


def oracle(cmd, model, data):
    run = subprocess.run(
        ["bash", os.path.join(HERE, "llama-vulkan.sh"), "oracle", cmd, model],
        input=data, capture_output=True, check=True,
    )
    return run.stdout.decode().splitlines()


def main():
    models_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/gguf-dequant/models")
    out = {
        "generator": "scripts/peers/tokenizer_fixtures.py (llama.cpp of llama-cpp-python 0.3.36: "
                     "llama_tokenize(add_special, parse_special), llama_detokenize(no removal, no "
                     "special rendering))",
        "models": {},
    }
    for name in MODELS:
        path = os.path.join(models_dir, name)
        ids = oracle("tokenize", path, b"\0".join(t.encode() for t in TEXTS))
        if len(ids) != len(TEXTS):
            sys.exit(f"{name}: {len(ids)} results for {len(TEXTS)} texts")
        id_lists = [[int(v) for v in line.split()] for line in ids]
        texts = oracle("detokenize", path, "\n".join(" ".join(map(str, l)) for l in id_lists).encode() + b"\n")
        out["models"][name] = [
            {"text": t, "ids": l, "detokenized": bytes.fromhex(h).decode("utf-8", "replace")}
            for t, l, h in zip(TEXTS, id_lists, texts)
        ]
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

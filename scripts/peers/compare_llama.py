#!/usr/bin/env python3
"""Our logits against llama.cpp's, model by model: examples/generate against llama.cpp's own CPU
and Vulkan backends (libllama through llama_oracle.c: f32 KV cache, the whole prompt as one batch),
on the same token ids.

Usage: python3 scripts/peers/compare_llama.py [--backend B] [--requant] [--speed] [--json OUT] [MODEL ...]

MODELs default to the two real models in ~/.cache/gguf-dequant/models. `--requant` adds
SmolLM2 requantised by llama-quantize to Q4_K_M, IQ4_XS, Q3_K_M and Q5_1 (cached beside the peer
build). For each model, the prompt below is tokenized by llama.cpp (80-90 tokens) and run three
ways; per pair of runs the table gives the share of positions whose top token agrees and the mean
KL divergence (nats) of the second's distribution from the first's, softmax in f64:
llama.cpp CPU against llama.cpp Vulkan (how far llama.cpp is from itself), each of those against
ours (`--backend`, default vulkan: the first Vulkan adapter, lavapipe on a machine without a GPU),
and all three against exact arithmetic: examples/generate's f64 CPU forward pass
(`--reference-logits`). Last, ours with `--activations ggml-cpu` (each projection's input
quantised to its weight's vec_dot_type and the GELU through ggml's f16 table, as ggml's CPU
backend does) against exact arithmetic and against llama.cpp CPU: the first is what that rounding
costs, the second shows that having the same rounding rules does not bring two f32
implementations together (the quantisation turns their last-bit differences into different
quants, layer after layer). Needs numpy (the project venv has it) and a release build of the
example (`cargo build --release --example generate`, done here).

`--speed` measures instead, in one sitting per model: llama-bench -p 64 -n 32 -ngl 99 (llama.cpp's
Vulkan backend on the same driver) and ours on 64 prompt tokens and 32 generated ones
(`--ignore-eos`), tokens per second of both and their ratios.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.expanduser(os.environ.get("GGUF_DEQUANT_MODELS", "~/.cache/gguf-dequant/models"))
PEER = os.path.join(HERE, "llama-vulkan.sh")
REQUANT = ["Q4_K_M", "IQ4_XS", "Q3_K_M", "Q5_1"]

PROMPT = (
    "The history of astronomy spans thousands of years. Early observers tracked the motions of the "
    "Sun, the Moon and the planets, and built calendars around them. In the seventeenth century, "
    "Galileo turned a telescope to the sky and saw the moons of Jupiter, while Kepler described "
    "the orbits of the planets with three laws. Newton then explained why they hold: one force, "
    "gravity, pulls the apple to the ground and keeps the Moon in its orbit around"
)


def peer(*args, data=None):
    return subprocess.run(["bash", PEER, *args], input=data, capture_output=True, check=True).stdout


def requantised(base):
    d = os.path.join(peer("dir").decode().strip(), "..", "models")
    os.makedirs(d, exist_ok=True)
    out = []
    for t in REQUANT:
        path = os.path.abspath(os.path.join(d, f"SmolLM2-135M-Instruct.{t}.gguf"))
        if not os.path.exists(path):
            print(f"llama-quantize {t} ...", file=sys.stderr)
            peer("quantize", base, path, t, "--allow-requantize")
        out.append(path)
    return out


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def compare(a, b):
    """Top-1 agreement and mean KL(P_a || P_b) over positions."""
    la, lb = log_softmax(a), log_softmax(b)
    top = float((a.argmax(-1) == b.argmax(-1)).mean())
    kl = float((np.exp(la) * (la - lb)).sum(-1).mean())
    return top, kl


def speed(gen, models, backend):
    rows = []
    prompt = ",".join(str(1000 + 7 * i) for i in range(64))
    for m in models:
        out = peer("bench", m).decode()
        llama = {}
        for line in out.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 7 and cells[-2] in ("pp64", "tg32"):
                llama[cells[-2]] = float(cells[-1].split()[0])
        run = subprocess.run([gen, m, "--tokens", prompt, "--n", "33", "--ignore-eos", "--backend", backend,
                              "--json"], check=True, capture_output=True)
        ours = json.loads(run.stdout)
        r = {"model": os.path.basename(m), "adapter": ours["adapter"],
             "ours_pp": ours["pp_tokens_per_s"], "ours_tg": ours["tg_tokens_per_s"],
             "llama_pp": llama.get("pp64"), "llama_tg": llama.get("tg32")}
        rows.append(r)
        print(f"{r['model']:36} pp64 ours {r['ours_pp']:7.2f} llama.cpp {r['llama_pp']:7.2f} "
              f"({r['ours_pp'] / r['llama_pp']:.2f}x)  tg32 ours {r['ours_tg']:7.2f} llama.cpp "
              f"{r['llama_tg']:7.2f} ({r['ours_tg'] / r['llama_tg']:.2f}x)  tokens/s on {r['adapter']}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="vulkan")
    ap.add_argument("--requant", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    models = args.models or [
        os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf"),
        os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf"),
    ]
    if args.requant:
        models += requantised(os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "generate"], cwd=ROOT, check=True)
    gen = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "examples", "generate")
    if args.speed:
        rows = speed(gen, models, args.backend)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            ids = peer("oracle", "tokenize", m, data=PROMPT.encode()).decode().split()
            line = " ".join(ids).encode() + b"\n"
            cpu, vk, ours, ref, og = (os.path.join(tmp, f) for f in ("cpu.npy", "vk.npy", "ours.npy", "ref.npy",
                                                                     "ours_ggml.npy"))
            peer("oracle", "logits", m, "cpu", cpu, data=line)
            peer("oracle", "logits", m, "vulkan", vk, data=line)
            subprocess.run([gen, m, "--tokens", ",".join(ids), "--n", "0", "--backend", args.backend,
                            "--logits", ours, "--reference-logits", ref], check=True, capture_output=True)
            subprocess.run([gen, m, "--tokens", ",".join(ids), "--n", "0", "--backend", args.backend,
                            "--logits", og, "--activations", "ggml-cpu"], check=True, capture_output=True)
            lc, lv, lo, lr, lg = np.load(cpu), np.load(vk), np.load(ours), np.load(ref), np.load(og)
            r = {"model": os.path.basename(m), "tokens": len(ids)}
            r["cpu_vs_vulkan"] = compare(lc, lv)
            r["cpu_vs_ours"] = compare(lc, lo)
            r["vulkan_vs_ours"] = compare(lv, lo)
            r["f64_vs_ours"] = compare(lr, lo)
            r["f64_vs_cpu"] = compare(lr, lc)
            r["f64_vs_vulkan"] = compare(lr, lv)
            r["f64_vs_ours_ggml_cpu"] = compare(lr, lg)
            r["cpu_vs_ours_ggml_cpu"] = compare(lc, lg)
            rows.append(r)
            print(f"{r['model']:36} {len(ids):3} tokens  " + "  ".join(
                f"{k}: top-1 {v[0] * 100:6.2f} %, KL {v[1]:.2e}" for k, v in r.items() if isinstance(v, tuple)),
                flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

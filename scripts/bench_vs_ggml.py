#!/usr/bin/env python3
"""Compare our CPU codecs with ggml's own `to_float`: speed, and bit-exactness on the same bytes.

Run with the project venv's python (it has the `libggml` package, which ships libggml-base.so):
    ~/.cache/gguf-dequant/venv/bin/python scripts/bench_vs_ggml.py [TYPE ...]

For each type: `cpu_throughput gen` writes random blocks (scale fields finite and normal); ggml's
`ggml_get_type_traits(type)->to_float` decodes them on one thread; `cpu_throughput run` times ours on
one thread and on all threads and writes its f32 output, which is compared bit for bit with ggml's
(NaN equals NaN). ggml's figure is the best of at least 5 calls and 0.5 s, ours the best of
`cpu_throughput run`'s own rounds (its six variants timed in turn), in each of 3 rounds that
alternate ours and ggml's, best round kept. Prints a markdown table; its last figure, the all-threads
run's memory traffic (quantised bytes read + f32 bytes written per second), shows which types are
bound by the machine's bandwidth rather than by the decoder. The f16 and bf16 columns time the same
decode writing f16 / bf16 (`cpu::dequant_to_bytes_with`): values per second as a fraction of the f32
path's, on one thread and on all threads.
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
N_VALUES = 4 * 1024 * 1024  # 16 MiB of f32 output per type
ROUNDS = 3  # ours and ggml timed alternately, so that both see the same load on a shared machine

sys.path.insert(0, os.path.join(ROOT, "scripts", "oracle"))
from ggml_lib import TYPES as GGML_TYPES, Ggml  # noqa: E402

# (name, ggml id) for every live type, in id order: the oracles' one table of types.
TYPES = sorted(((name, v[0]) for name, v in GGML_TYPES.items()), key=lambda t: t[1])

TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64)


def load_ggml():
    """ggml's libggml-base.so with `ggml_get_type_traits` typed (the oracles' bindings)."""
    return Ggml().lib


def best_time(f, min_reps=5, min_time=0.5):
    f()
    best = float("inf")
    start = time.perf_counter()
    reps = 0
    while reps < min_reps or time.perf_counter() - start < min_time:
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
        reps += 1
    return best


def same_bits(a, b):
    a = a.view(np.uint32)
    b = b.view(np.uint32)
    fa, fb = a.view(np.float32), b.view(np.float32)
    return bool(np.all((a == b) | (np.isnan(fa) & np.isnan(fb))))


def main():
    wanted = set(a.upper() for a in sys.argv[1:])
    subprocess.run(["cargo", "build", "--release", "--example", "cpu_throughput", "-q"],
                   cwd=ROOT, check=True)
    exe = os.path.join(TARGET, "release", "examples", "cpu_throughput")
    lib = load_ggml()
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    print(f"CPU: {model}, {os.cpu_count()} cores; {N_VALUES} values (16 MiB f32) per type\n")
    print("| type | ggml GB/s | ours 1t GB/s | ours all GB/s | 1t / ggml | all / 1t "
          "| all: in + out GB/s | f16 / f32 1t | bf16 / f32 1t | f16 / f32 all | bf16 / f32 all "
          "| bit-exact vs ggml |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, tid in TYPES:
            if wanted and name not in wanted:
                continue
            src_path = os.path.join(tmp, "src.bin")
            out_path = os.path.join(tmp, "out.f32")
            subprocess.run([exe, "gen", name, str(N_VALUES), str(tid + 1), src_path], check=True)
            traits = lib.ggml_get_type_traits(tid).contents if tid < 43 else None
            to_float = TO_FLOAT(traits.to_float) if traits and traits.to_float else None
            src = np.fromfile(src_path, dtype=np.uint8)
            n = N_VALUES
            dst = np.empty(n, dtype=np.float32)
            sp = src.ctypes.data_as(ctypes.c_void_p)
            dp = dst.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            one = allt = 0.0
            halves = [0.0] * 4
            ggml_gbs = None
            for _ in range(ROUNDS):
                run = subprocess.run([exe, "run", name, src_path, out_path], check=True,
                                     capture_output=True, text=True).stdout.split()
                assert int(run[1]) == n
                one, allt = max(one, float(run[2])), max(allt, float(run[3]))
                halves = [max(h, float(x)) for h, x in zip(halves, run[4:8])]
                if to_float:
                    t = best_time(lambda: to_float(sp, dp, n))
                    ggml_gbs = max(ggml_gbs or 0.0, n * 4 / 1e9 / t)
            ours = np.fromfile(out_path, dtype=np.float32)
            exact = ("yes" if same_bits(ours, dst) else "**NO**") if to_float \
                else "n/a (no ggml to_float)"
            g = f"{ggml_gbs:.2f}" if ggml_gbs else "–"
            r = f"{one / ggml_gbs:.2f}" if ggml_gbs else "–"
            # Memory traffic of the all-threads run: quantised bytes read plus f32 bytes written.
            traffic = allt * (1 + os.path.getsize(src_path) / (4 * n))
            h = " | ".join(f"{x:.2f}" for x in halves)
            print(f"| {name} | {g} | {one:.2f} | {allt:.2f} | {r} | {allt / one:.2f} "
                  f"| {traffic:.0f} | {h} | {exact} |", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a GGUF of two Llama-3-8B-shaped transformer blocks for `gguf-dequant tune` on a lent GPU,
where no model of real size can be fetched: blk.0 as llama-quantize's Q4_K_M mixes it (Q4_K, with
attn_v and ffn_down in Q6_K), blk.1 all Q8_0. Every block is zero bytes (all weights 0), so the
file compresses to almost nothing in the staged bundle; the kernels' time does not depend on the
values (no format branches on them), so the timings are those of real weights, and the tuner's
output check compares zeros. Needs gguf-py (the tests' venv has it).

    python3 scripts/gpu/synth_block.py OUT.gguf
"""

import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

# ggml dims [K, N]: N rows of K values (Llama-3-8B: d_model 4096, 8 KV heads of 128, FFN 14336).
SHAPES = {
    "attn_q": (4096, 4096),
    "attn_k": (4096, 1024),
    "attn_v": (4096, 1024),
    "attn_output": (4096, 4096),
    "ffn_gate": (4096, 14336),
    "ffn_up": (4096, 14336),
    "ffn_down": (14336, 4096),
}
Q4_K_M = {"attn_v": T.Q6_K, "ffn_down": T.Q6_K}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    w = GGUFWriter(sys.argv[1], "llama")
    w.add_name("synthetic Llama-3-8B blocks (zero weights)")
    w.add_block_count(2)
    for blk, types in ((0, lambda n: Q4_K_M.get(n, T.Q4_K)), (1, lambda n: T.Q8_0)):
        for name, (k, n) in SHAPES.items():
            t = types(name)
            elems, size = GGML_QUANT_SIZES[t]
            rows = np.zeros((n, k // elems * size), dtype=np.uint8)
            w.add_tensor(f"blk.{blk}.{name}.weight", rows, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Real quantiser output: a SmolLM2 weight quantised by llama.cpp's own quantisers, decoded by ggml.

Usage: quantize_fixtures.py OUT_DIR MODEL.gguf

The random blocks of make_fixtures.py exercise every bit pattern a codec can meet, but not the ones
a real quantiser writes (zero and near-zero scales, saturated 6-bit scales, the grid indices an
i-quant search actually picks, ...). Here a real weight, `blk.0.ffn_down.weight` of the model
(ne0 = 1536 = 6 x 256, so every block size divides a row), is decoded to f32 by ggml's own
to_float and re-quantised by ggml's C into every type ggml can quantise:

  * ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, imatrix), after ggml_quantize_init(type)
    (the i-quant grids), for the 16 super-block types except Q8_K and the small-block types;
  * quantize_row_q8_K_ref and quantize_row_q8_1_ref for Q8_K and Q8_1, which ggml_quantize_chunk does
    not handle (its switch aborts the process).

Three variants per type:
  * "plain":   12 rows, imatrix NULL (the *_ref path), except where ggml_quantize_requires_imatrix
               (IQ2_XXS, IQ2_XS, IQ1_S): an imatrix of ones;
  * "imatrix": 8 other rows, a non-uniform importance matrix (1 + column mean of x^2 over the whole
               tensor, normalised): the weighted search path of every type that takes one (Q8_0,
               TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0 ignore it: for them it is just 8 more rows; the
               source is Q4_1, so Q4_1 re-quantises losslessly either way);
  * "edge":    6 rows: all zeros; the real row x 1e-4, x 1e-5 and x 1e-6 (f16/E4M3 scales go
               subnormal, then flush to zero, type by type); the real row with its largest value
               x 1000 (an outlier); a constant row. Quantiser output on these may be anything ggml
               writes (even non-finite): the fixture is whatever ggml did.
Every result is decoded by ggml's to_float (dequantize_row_q8_K for Q8_K; Q8_1, which ggml cannot
decode, by make_fixtures.py's numpy rule d * qs) and, where gguf-py 0.19.0
has a dequantiser, cross-checked against it bit for bit (NaN == NaN); a disagreement is fatal.

Writes OUT_DIR/quantized/manifest.json = {"format", "source", "versions", "fixtures": [{"type",
"type_id", "variant", "source_tensor", "rows", "n_per_row", "quantizer", "imatrix", "blocks",
"expected", "oracle", "agreed_with", "non_finite_values"}]} plus raw blocks (*.bin) and
little-endian f32 (*.f32).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
import time
import warnings

import numpy as np
from gguf import GGMLQuantizationType, quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggml_lib import NAME_BY_ID, TYPES, Ggml, GgufInitParams, libggml_version  # noqa: E402
from make_fixtures import rule_q8_1  # noqa: E402

SOURCE_TENSOR = "blk.0.ffn_down.weight"
PLAIN_ROWS = (0, 12)  # rows [a, b) of the source tensor
IMATRIX_ROWS = (12, 20)
EDGE_ROW = 24  # the real row the edge rows are made from

# The 16 super-block (256-value) types; all must get fixtures.
SUPER_BLOCK = [
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
    "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_XS",
    "TQ1_0", "TQ2_0",
]  # fmt: skip
SMALL_BLOCK = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "IQ4_NL", "MXFP4", "NVFP4", "Q1_0", "Q2_0"]
ROW_REF = {"Q8_K": "quantize_row_q8_K_ref", "Q8_1": "quantize_row_q8_1_ref"}


def read_tensor(g: Ggml, path: str, name: str) -> tuple[np.ndarray, str, list[int]]:
    """The tensor `name` of `path`, decoded to f32 by ggml (rows x ne0), its type and its ne."""
    lib = g.lib
    ctx = lib.gguf_init_from_file(path.encode(), GgufInitParams(True, None))
    if not ctx:
        raise SystemExit(f"ggml gguf_init_from_file failed on {path}")
    try:
        for i in range(lib.gguf_get_n_tensors(ctx)):
            if lib.gguf_get_tensor_name(ctx, i).decode() != name:
                continue
            tid = int(lib.gguf_get_tensor_type(ctx, i))
            off = lib.gguf_get_data_offset(ctx) + lib.gguf_get_tensor_offset(ctx, i)
            size = lib.gguf_get_tensor_size(ctx, i)
            ne_p = lib.gguf_get_tensor_ne(ctx, i)
            ne = [int(ne_p[k]) for k in range(4)]
            tname = NAME_BY_ID.get(tid)
            if tname is None or not g.can_decode(tid):
                raise SystemExit(f"{path}: {name}: ggml cannot decode type id {tid}")
            with open(path, "rb") as f:
                f.seek(off)
                raw = np.frombuffer(f.read(size), dtype=np.uint8)
            if tname == "F32":
                x = raw.view("<f4").astype(np.float32)
            else:
                x = g.decode(tid, raw)
            return x.reshape(-1, ne[0]), tname, ne
    finally:
        lib.gguf_free(ctx)
    raise SystemExit(f"{path}: no tensor {name}")


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per value: bit-exact equality, except that any NaN equals any NaN."""
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def gguf_py_decoder(name: str):
    if not hasattr(GGMLQuantizationType, name):
        return None
    qt = GGMLQuantizationType[name]
    if qt not in quants._type_traits:  # noqa: SLF001
        return None
    return lambda blocks: np.asarray(quants.dequantize(blocks, qt), dtype=np.float32).reshape(-1)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = os.path.join(sys.argv[1], "quantized")
    model = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    np.seterr(all="ignore")
    warnings.simplefilter("ignore", RuntimeWarning)
    g = Ggml()

    w, src_type, ne = read_tensor(g, model, SOURCE_TENSOR)
    n_per_row = w.shape[1]
    if n_per_row % 256:
        raise SystemExit(f"{SOURCE_TENSOR}: rows of {n_per_row} are not a multiple of 256")
    if w.shape[0] <= EDGE_ROW or not np.all(np.isfinite(w)):
        raise SystemExit(f"{SOURCE_TENSOR}: want >= {EDGE_ROW + 1} finite rows, got {w.shape}")
    src_label = f"{os.path.basename(model)}:{SOURCE_TENSOR} ({src_type}, ne {ne[:2]}, ggml to_float)"

    # A deterministic non-uniform importance matrix: column energy over the whole tensor.
    col = np.mean(w.astype(np.float64) ** 2, axis=0)
    imat_weighted = (1.0 + col / col.mean()).astype(np.float32)
    ones = np.ones(n_per_row, dtype=np.float32)

    real = w[EDGE_ROW].copy()
    outlier = real.copy()
    outlier[int(np.argmax(np.abs(real)))] *= 1000.0
    tiny = [np.float32(f) for f in (1e-4, 1e-5, 1e-6)]
    edge = np.stack(
        [np.zeros(n_per_row, np.float32)]
        + [real * f for f in tiny]
        + [outlier, np.full(n_per_row, 0.0123, np.float32)]
    ).astype(np.float32)

    variants = [
        ("plain", w[PLAIN_ROWS[0] : PLAIN_ROWS[1]], f"rows {PLAIN_ROWS[0]}..{PLAIN_ROWS[1]}"),
        ("imatrix", w[IMATRIX_ROWS[0] : IMATRIX_ROWS[1]], f"rows {IMATRIX_ROWS[0]}..{IMATRIX_ROWS[1]}"),
        ("edge", edge, f"zeros, row {EDGE_ROW} x 1e-4, x 1e-5, x 1e-6, with one value x 1000, constant 0.0123"),
    ]

    fixtures: list[dict] = []
    total = 0
    how: dict[str, dict] = {}
    for name in SUPER_BLOCK + SMALL_BLOCK:
        t0 = time.perf_counter()
        tid, blk, size = TYPES[name]
        needs_imatrix = g.quantize_requires_imatrix(tid)
        if name in ROW_REF:
            quantizer = f"ggml:{ROW_REF[name]}"
        else:
            g.quantize_init(tid)
            quantizer = "ggml:ggml_quantize_chunk"
        how[name] = {"quantizer": quantizer, "requires_imatrix": needs_imatrix}
        gp = gguf_py_decoder(name)
        for variant, x, rows_label in variants:
            x = np.ascontiguousarray(x, dtype=np.float32)
            rows = x.shape[0]
            if name in ROW_REF:
                imatrix, imat_label = None, "none (reference row quantiser takes none)"
                blocks = g.quantize_row_ref(tid, x)
            else:
                if variant == "imatrix":
                    imatrix, imat_label = imat_weighted, "1 + column mean of x^2 / its mean"
                elif needs_imatrix:
                    imatrix, imat_label = ones, "ones (ggml_quantize_requires_imatrix)"
                else:
                    imatrix, imat_label = None, "NULL"
                blocks = g.quantize_chunk(tid, x, n_per_row, imatrix)
            assert blocks.size == rows * n_per_row // blk * size
            if g.can_decode(tid):
                y, oracle = g.decode(tid, blocks), g.decoder_name(tid)
            elif name == "Q8_1":  # ggml has no to_float for Q8_1: make_fixtures.py's rule
                y, oracle = rule_q8_1(blocks), "rule:q8_1-int8-times-d"
            else:
                raise SystemExit(f"{name}: no decoder")
            assert y.size == rows * n_per_row
            agreed = []
            if gp is not None:
                y2 = gp(blocks)
                ok = same_bits(y, y2) if y2.shape == y.shape else np.zeros(1, bool)
                if not np.all(ok):
                    i = int(np.nonzero(~ok)[0][0]) if y2.shape == y.shape else -1
                    raise SystemExit(
                        f"ORACLES DISAGREE: {name} {variant}: ggml vs gguf-py, first at {i}"
                        + (f": {y.view(np.uint32)[i]:#010x} vs {y2.view(np.uint32)[i]:#010x}" if i >= 0 else "")
                    )
                agreed.append("gguf-py")
            bfile = f"{name}.{variant}.bin"
            efile = f"{name}.{variant}.f32"
            with open(os.path.join(out, bfile), "wb") as f:
                f.write(blocks.tobytes())
            with open(os.path.join(out, efile), "wb") as f:
                f.write(y.astype("<f4").tobytes())
            total += blocks.size + y.size * 4
            fixtures.append(
                {
                    "type": name,
                    "type_id": tid,
                    "variant": variant,
                    "source_tensor": f"{SOURCE_TENSOR} {rows_label}",
                    "rows": rows,
                    "n_per_row": n_per_row,
                    "n_blocks": int(blocks.size // size),
                    "quantizer": quantizer,
                    "imatrix": imat_label,
                    "blocks": bfile,
                    "expected": efile,
                    "oracle": oracle,
                    "agreed_with": agreed,
                    "non_finite_values": int(np.count_nonzero(~np.isfinite(y))),
                    "blocks_sha256": hashlib.sha256(blocks.tobytes()).hexdigest(),
                }
            )
        how[name]["seconds"] = round(time.perf_counter() - t0, 2)
    g.quantize_free()

    missing = [n for n in SUPER_BLOCK if not any(f["type"] == n for f in fixtures)]
    if missing:
        raise SystemExit(f"coverage: no quantised fixture for {missing}")

    manifest = {
        "format": "gguf-dequant quantised fixtures v1",
        "generator_sha256": hashlib.sha256(open(__file__, "rb").read()).hexdigest(),
        "source": src_label,
        "versions": {
            "libggml-python": libggml_version(),
            "gguf": importlib.metadata.version("gguf"),
            "numpy": np.__version__,
        },
        "libggml_base": g.path,
        "super_block_types": SUPER_BLOCK,
        "quantizers": how,
        "fixtures": fixtures,
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"quantized fixtures: {len(fixtures)} ({len(how)} types) from {src_label}, {total / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

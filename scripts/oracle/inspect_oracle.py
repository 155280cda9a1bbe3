#!/usr/bin/env python3
"""What ggml's C GGUF reader and gguf-py's GGUFReader see in GGUF files.

Usage: inspect_oracle.py OUT_DIR FILE.gguf...

Writes OUT_DIR/inspect/<file name>.json:
  {"ggml":    {"version", "alignment", "data_offset", "n_tensors", "n_kv",
               "tensors": [{"name", "type_id", "ne", "offset", "n_bytes"}], "metadata_keys": [...]},
   "gguf_py": {same keys; tensors carry "dims" (ggml order, n_dims entries) instead of "ne"}}
Tensor "offset" is relative to the data section, as stored in the file; "data_offset" is the absolute
file offset of the data section. ne is ggml's 4-entry ne[] (1 for unused dims).
The two readers are cross-checked (names, types, offsets, sizes, dims, keys); any disagreement fails.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from gguf import GGUFReader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggml_lib import Ggml, GgufInitParams  # noqa: E402


def ggml_view(g: Ggml, path: str) -> dict:
    lib = g.lib
    ctx = lib.gguf_init_from_file(path.encode(), GgufInitParams(True, None))
    if not ctx:
        raise SystemExit(f"ggml gguf_init_from_file failed on {path}")
    try:
        tensors = []
        for i in range(lib.gguf_get_n_tensors(ctx)):
            ne = lib.gguf_get_tensor_ne(ctx, i)
            tensors.append(
                {
                    "name": lib.gguf_get_tensor_name(ctx, i).decode(),
                    "type_id": int(lib.gguf_get_tensor_type(ctx, i)),
                    "ne": [int(ne[k]) for k in range(4)],
                    "offset": int(lib.gguf_get_tensor_offset(ctx, i)),
                    "n_bytes": int(lib.gguf_get_tensor_size(ctx, i)),
                }
            )
        n_kv = lib.gguf_get_n_kv(ctx)
        return {
            "version": int(lib.gguf_get_version(ctx)),
            "alignment": int(lib.gguf_get_alignment(ctx)),
            "data_offset": int(lib.gguf_get_data_offset(ctx)),
            "n_tensors": len(tensors),
            "n_kv": int(n_kv),
            "tensors": tensors,
            "metadata_keys": [lib.gguf_get_key(ctx, i).decode() for i in range(n_kv)],
        }
    finally:
        lib.gguf_free(ctx)


def gguf_py_view(path: str) -> dict:
    r = GGUFReader(path, "r")
    version = int(r.fields["GGUF.version"].parts[-1][0])
    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    tensors = []
    for t in r.tensors:
        tensors.append(
            {
                "name": t.name,
                "type_id": int(t.tensor_type),
                "dims": [int(x) for x in np.asarray(t.shape).tolist()],
                "offset": int(t.data_offset - r.data_offset),
                "n_bytes": int(t.n_bytes),
            }
        )
    return {
        "version": version,
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "n_tensors": len(tensors),
        "n_kv": len(keys),
        "tensors": tensors,
        "metadata_keys": keys,
    }


def cross_check(name: str, a: dict, b: dict) -> None:
    errs = []
    for k in ("version", "alignment", "data_offset", "n_tensors", "n_kv", "metadata_keys"):
        if a[k] != b[k]:
            errs.append(f"{k}: ggml {a[k]!r} vs gguf-py {b[k]!r}")
    for ta, tb in zip(a["tensors"], b["tensors"]):
        padded = tb["dims"] + [1] * (4 - len(tb["dims"]))
        for k in ("name", "type_id", "offset", "n_bytes"):
            if ta[k] != tb[k]:
                errs.append(f"tensor {ta['name']}: {k}: ggml {ta[k]!r} vs gguf-py {tb[k]!r}")
        if ta["ne"] != padded:
            errs.append(f"tensor {ta['name']}: ne {ta['ne']} vs dims {tb['dims']}")
    if errs:
        raise SystemExit(f"{name}: ggml and gguf-py readers disagree:\n  " + "\n  ".join(errs[:20]))


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = os.path.join(sys.argv[1], "inspect")
    os.makedirs(out, exist_ok=True)
    g = Ggml()
    for path in sys.argv[2:]:
        name = os.path.basename(path)
        a, b = ggml_view(g, path), gguf_py_view(path)
        cross_check(name, a, b)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"file": name, "ggml": a, "gguf_py": b}, f, indent=1)
            f.write("\n")
        types = sorted({t["type_id"] for t in a["tensors"]})
        print(
            f"inspect: {name}: GGUF v{a['version']}, {a['n_tensors']} tensors, {a['n_kv']} keys, "
            f"alignment {a['alignment']}, data at {a['data_offset']}, type ids {types}; ggml == gguf-py"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

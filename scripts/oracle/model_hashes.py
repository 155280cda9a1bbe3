#!/usr/bin/env python3
"""sha256 of every tensor of real GGUF models, decoded by ggml's C to_float.

Usage: model_hashes.py OUT_DIR FILE.gguf...

Writes OUT_DIR/models/<file name>.json = {"file", "oracle", "tensors": {name: {"type_id", "n_values",
"sha256"}}}: sha256 over the little-endian f32 values of the whole tensor (ggml element order).
F32 tensors are hashed as stored (identity). Offsets come from ggml's own GGUF reader. Tensors are
decoded in bounded chunks, so memory stays small whatever the tensor size.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggml_lib import NAME_BY_ID, TYPES, Ggml, GgufInitParams  # noqa: E402

CHUNK_VALUES = 1 << 22  # values decoded per call (16 MiB of f32)


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = os.path.join(sys.argv[1], "models")
    os.makedirs(out, exist_ok=True)
    g = Ggml()
    lib = g.lib
    for path in sys.argv[2:]:
        ctx = lib.gguf_init_from_file(path.encode(), GgufInitParams(True, None))
        if not ctx:
            raise SystemExit(f"ggml gguf_init_from_file failed on {path}")
        data = np.memmap(path, dtype=np.uint8, mode="r")
        base = lib.gguf_get_data_offset(ctx)
        tensors = {}
        total = 0
        try:
            for i in range(lib.gguf_get_n_tensors(ctx)):
                name = lib.gguf_get_tensor_name(ctx, i).decode()
                tid = int(lib.gguf_get_tensor_type(ctx, i))
                off = base + lib.gguf_get_tensor_offset(ctx, i)
                size = lib.gguf_get_tensor_size(ctx, i)
                tname = NAME_BY_ID.get(tid)
                if tname is None:
                    raise SystemExit(f"{path}: tensor {name} has unknown type id {tid}")
                _, blk, bsize = TYPES[tname]
                raw = data[off : off + size]
                h = hashlib.sha256()
                if tname == "F32":
                    h.update(raw.tobytes())
                elif g.can_decode(tid):
                    step = max(1, CHUNK_VALUES // blk) * bsize
                    for s in range(0, size, step):
                        y = g.decode(tid, np.asarray(raw[s : s + step]))
                        h.update(y.astype("<f4", copy=False).tobytes())
                else:
                    raise SystemExit(f"{path}: tensor {name}: ggml cannot decode type {tname}")
                n_values = size // bsize * blk
                total += n_values
                tensors[name] = {"type_id": tid, "n_values": n_values, "sha256": h.hexdigest()}
        finally:
            lib.gguf_free(ctx)
            del data
        fname = os.path.basename(path)
        with open(os.path.join(out, fname + ".json"), "w") as f:
            json.dump({"file": fname, "oracle": "ggml to_float (F32: identity)", "tensors": tensors}, f, indent=1)
            f.write("\n")
        print(f"model hashes: {fname}: {len(tensors)} tensors, {total} values")
    return 0


if __name__ == "__main__":
    sys.exit(main())

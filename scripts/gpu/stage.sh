#!/usr/bin/env bash
# Stages in .gpu/ (kept out of git through .git/info/exclude) what a bare x86-64 Linux machine with an
# NVIDIA driver, and no Rust toolchain, Vulkan loader or llama.cpp, needs for scripts/gpu/suite.sh:
# stripped release builds of gguf-dequant and of the GPU test binary (tests/gpu.rs), Debian's
# Vulkan/EGL loader packages and, where `scripts/peers/llama-vulkan.sh build` has run, llama.cpp's
# test-backend-ops with its ggml libraries: one xz bundle (about 25 MiB), unpacked there by run.sh;
# and two Llama-3-8B-shaped blocks of zero weights for `tune` (scripts/gpu/synth_block.py, through
# the tests' venv: GGUF_DEQUANT_PYTHON; 370 MB, 60 KB as synth.gguf.xz).
#
#   bash scripts/gpu/stage.sh        then, on that machine, from a copy of this tree with .gpu/:
#   bash scripts/gpu/suite.sh OUTDIR     (or bash scripts/gpu/run.sh ARGS: one gguf-dequant command)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
rm -rf .gpu && mkdir -p .gpu/debs
s=$(mktemp -d) && trap 'rm -rf "$s"' EXIT
mkdir -p "$s/bin" "$s/peer"
cargo build --release --bin gguf-dequant
strip -o "$s/bin/gguf-dequant" "${CARGO_TARGET_DIR:-target}/release/gguf-dequant"
tests=$(cargo test --release --test gpu --no-run --message-format=json |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu":
        print(m["executable"])')
strip -o "$s/bin/gpu-tests" "$tests"
pwd >.gpu/manifest_dir
peer=$(bash scripts/peers/llama-vulkan.sh dir)/bin
if [[ -x $peer/test-backend-ops ]]; then
    strip -o "$s/peer/test-backend-ops" "$peer/test-backend-ops"
    for l in libggml.so.0 libggml-base.so.0 libggml-cpu.so.0 libggml-vulkan.so.0; do
        strip -o "$s/peer/$l" "$(readlink -f "$peer/$l")"
    done
    # OpenMP's runtime, for a machine without one (run.sh adds it only then).
    mkdir -p "$s/peer/fallback" && cp -L "$(ldconfig -p | awk '/libgomp.so.1 .*x86-64/ {print $NF; exit}')" "$s/peer/fallback/"
else
    echo "no llama.cpp peer build (bash scripts/peers/llama-vulkan.sh build): staging without it" >&2
fi
tar -C "$s" -cJf .gpu/bundle.tar.xz bin peer
py=${GGUF_DEQUANT_PYTHON:-${GGUF_DEQUANT_CACHE:-$HOME/.cache/gguf-dequant}/venv/bin/python}
if "$py" -c 'import gguf' 2>/dev/null; then
    "$py" scripts/gpu/synth_block.py "$s/synth.gguf" && xz -T2 -c "$s/synth.gguf" >.gpu/synth.gguf.xz
    rm -f "$s/synth.gguf"
else
    echo "no python with gguf-py ($py; bash scripts/test.sh makes the venv): staging without tune's model" >&2
fi
lists=$(mktemp -d) && mkdir -p "$lists/partial"
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists="$lists")
apt-get "${o[@]}" update -qq
(cd .gpu/debs && apt-get "${o[@]}" download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
rm -rf "$lists"
du -sh .gpu

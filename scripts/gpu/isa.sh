#!/usr/bin/env bash
# isa.sh OUT [FAMILY...]: real AMD machine code of every matvec kernel variant (and of llama.cpp's matrix-vector
# shaders), with no GPU: the kernels' SPIR-V (examples/spirv.rs, as wgpu's Vulkan backend writes it) compiled by
# Mesa's RADV on its compile-only null device for chips that need not be present, its statistics (VGPRs, SGPRs,
# spills, waves per SIMD, instructions) and the instructions per weight of each kernel's inner loop, read from
# the disassembly.
#
#   bash scripts/gpu/isa.sh /tmp/isa                 matvec at n = 1, the variants a GPU runs, navi31 and gfx940
#   bash scripts/gpu/isa.sh /tmp/isa matvec_id matmul get_rows
#
# FAMILY: matvec (the default), matvec_id, matmul, get_rows. Writes OUT/isa.json (one row per variant, build and
# GPU: variant, family, format, gpu, vgprs, sgprs, spills, waves_per_simd, instructions, loop_insts,
# values_per_step, inst_per_weight, ...; source "ours" = the SPIR-V wgpu hands the driver, "ours-unbounded" = the
# same without naga's loop bounding, "llama.cpp" = its shaders with the specialisation constants ggml-vulkan.cpp
# sets on that GPU), OUT/isa-brief.json (per format and GPU: our default variant t32.u4 and the H200's t32.u1,
# each with and without loop bounding, our best variant, llama.cpp's) and OUT/table.txt (printed too: per format
# ours against llama.cpp, and the rank correlations with the H200 figures of docs/bench/h200-*). The heuristics
# are in scripts/gpu/isa/isa.py's header. About 70 s once built and cached (2032 compilations); ISA_ALL=1 about
# 16 min (20952), on two cores. Idempotent; everything downloaded is cached in
# ${GGUF_DEQUANT_CACHE:-~/.cache/gguf-dequant} (radv-null/: Mesa 25 from Debian bookworm-backports, unpacked there,
# not installed; peer/src: the llama-cpp-python 0.3.36 sdist that scripts/peers/llama-vulkan.sh also uses).
#
# Environment:
#   ISA_GPUS="navi31 gfx940"   RADV_FORCE_FAMILY chips (navi21, navi31, gfx1201, gfx940, vega10, ...)
#   ISA_ALL=1                  every matvec/matvec_id variant (5224 matvec at n = 1), not only the 494 a GPU runs
#   ISA_COLUMNS=1              matvec columns: a list (1,2,8) or "all"
#   ISA_FORMATS=Q4_K,IQ2_XXS   only these formats
#   ISA_UNBOUNDED=0            skip the build without loop bounding
#   ISA_LLAMA=0                skip llama.cpp's shaders
#   ISA_ASM=1                  keep the disassembly in OUT/asm/GPU/ (else deleted at the end; about 150 MB by
#                              default; `isa.py summary OUT` can then be rerun on it)
#   ISA_JOBS=2                 compiler processes per GPU
#   ISA_H200=0                 skip the rank correlation with the H200 figures of docs/bench/h200-*
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ $# -ge 1 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
OUT=$1
shift
families=("$@")
((${#families[@]})) || families=(matvec)
GPUS=${ISA_GPUS:-navi31 gfx940}
JOBS=${ISA_JOBS:-2}
CACHE=${GGUF_DEQUANT_CACHE:-$HOME/.cache/gguf-dequant}
PEER=${GGUF_DEQUANT_PEER_CACHE:-$CACHE/peer}
SDIST=llama_cpp_python-0.3.36
log() { echo "[isa] $*" >&2; }
start=$(date +%s)

# 1. What it needs from Debian: glslc (llama.cpp's shaders), gcc and the Vulkan headers (shaderstats).
need=()
command -v glslc >/dev/null || need+=(glslc)
command -v gcc >/dev/null || need+=(gcc)
[[ -f /usr/include/vulkan/vulkan_core.h ]] || need+=(libvulkan-dev)
command -v python3 >/dev/null || need+=(python3)
if ((${#need[@]})); then
    [[ $(id -u) -eq 0 ]] || { log "missing: ${need[*]} (sudo apt-get install ${need[*]})"; exit 1; }
    log "apt-get install ${need[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# 2. Mesa 25's RADV beside the system's Mesa, and shaderstats built against it.
eval "$(bash "$here/isa/radv-null.sh" "$CACHE/radv-null")"

# 3. Our SPIR-V: one file per variant, as wgpu writes it, and again without loop bounding.
rm -rf "$OUT/spv" "$OUT/raw" "$OUT/asm"
mkdir -p "$OUT/spv" "$OUT/raw"
args=()
[[ ${ISA_ALL:-0} == 1 ]] && args+=(--all)
args+=(--columns "${ISA_COLUMNS:-1}")
[[ -n ${ISA_FORMATS:-} ]] && args+=(--format "$ISA_FORMATS")
log "building examples/spirv.rs"
(cd "$root" && cargo build -q --locked --example spirv) >&2
spirv=$root/target/debug/examples/spirv
[[ -n ${CARGO_TARGET_DIR:-} ]] && spirv=$CARGO_TARGET_DIR/debug/examples/spirv
"$spirv" "$OUT/spv/wgpu" "${families[@]}" "${args[@]}"
[[ ${ISA_UNBOUNDED:-1} == 1 ]] && "$spirv" "$OUT/spv/unbounded" "${families[@]}" "${args[@]}" --no-loop-bounding

# 4. llama.cpp's mul_mat_vec shaders (only with matvec): the sdist's sources, glslc with vulkan-shaders-gen's defines.
if [[ ${ISA_LLAMA:-1} == 1 && " ${families[*]} " == *" matvec "* ]]; then
    src=$PEER/src/$SDIST/vendor/llama.cpp/ggml/src/ggml-vulkan/vulkan-shaders
    if [[ ! -d $src ]]; then
        log "downloading the llama-cpp-python 0.3.36 sdist into $PEER/src"
        mkdir -p "$PEER/src"
        python3 -m pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==0.3.36" -d "$PEER/src"
        tar xzf "$PEER/src/$SDIST.tar.gz" -C "$PEER/src"
    fi
    python3 "$here/isa/isa.py" llama "$src" "$OUT/spv/llama"
fi

# 5. Compile every file on every GPU: ISA_JOBS shaderstats processes per GPU, each a share of the job list; a
#    job whose process died (a compiler crash) is retried alone.
for gpu in $GPUS; do
    jobs_file=$OUT/raw/$gpu.jobs
    python3 "$here/isa/isa.py" jobs "$OUT" "$gpu" >"$jobs_file"
    n=$(wc -l <"$jobs_file")
    log "$gpu: compiling $n shaders ($JOBS processes)"
    split -n "r/$JOBS" -d "$jobs_file" "$OUT/raw/$gpu.part."
    pids=()
    for part in "$OUT/raw/$gpu.part."*; do
        RADV_FORCE_FAMILY=$gpu "$SHADERSTATS" -b "$part" >"$part.jsonl" 2>"$part.err" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || true; done
    cat "$OUT/raw/$gpu.part."*.jsonl >"$OUT/raw/$gpu.jsonl"
    rm -f "$OUT/raw/$gpu.part."*
    # The jobs with no result line: one process each.
    python3 - "$jobs_file" "$OUT/raw/$gpu.jsonl" >"$OUT/raw/$gpu.retry" <<'EOF'
import json, sys
done = set()
for line in open(sys.argv[2]):
    try:
        done.add(json.loads(line)["name"])
    except (ValueError, KeyError):
        pass
for line in open(sys.argv[1]):
    if line.split() and line.split()[0] not in done:
        sys.stdout.write(line)
EOF
    if [[ -s $OUT/raw/$gpu.retry ]]; then
        log "$gpu: $(wc -l <"$OUT/raw/$gpu.retry") jobs got no result; retrying them one by one"
        while read -r line; do
            printf '%s\n' "$line" | RADV_FORCE_FAMILY=$gpu "$SHADERSTATS" -b - >>"$OUT/raw/$gpu.jsonl" 2>/dev/null ||
                printf '{"name": "%s", "ok": false, "error": "the compiler crashed"}\n' "${line%% *}" >>"$OUT/raw/$gpu.jsonl"
        done <"$OUT/raw/$gpu.retry"
    fi
    rm -f "$OUT/raw/$gpu.retry"
done

# 6. The summary.
h200=()
if [[ ${ISA_H200:-1} == 1 && -f $root/docs/bench/h200-vulkan.json && -f $root/docs/bench/h200-llama-vulkan.txt ]]; then
    h200=(--h200 "$root/docs/bench/h200-vulkan.json" "$root/docs/bench/h200-llama-vulkan.txt")
fi
debs=("$CACHE"/radv-null/debs/mesa-vulkan-drivers_*.deb)
mesa=$(dpkg-deb -f "${debs[0]}" Version 2>/dev/null || echo "?")
ISA_PROVENANCE="$(date -u +%Y-%m-%d), gguf-dequant $(git -C "$root" describe --always --dirty 2>/dev/null || echo "?"), Mesa $mesa RADV null device, $(glslc --version 2>/dev/null | head -1), llama.cpp of llama-cpp-python 0.3.36" \
    ISA_GPUS=$GPUS python3 "$here/isa/isa.py" summary "$OUT" "${h200[@]}"
[[ ${ISA_ASM:-0} == 1 ]] || rm -rf "$OUT/asm"
log "done in $(($(date +%s) - start)) s: $OUT/isa.json, $OUT/isa-brief.json, $OUT/table.txt"

#!/usr/bin/env bash
# The whole check on a lent GPU machine in one run (stage first: scripts/gpu/stage.sh), steps in order
# of worth, each under a time limit, until SECONDS (default 400) are spent. Writes into OUTDIR at most
# fourteen files: log.txt (the GPU and CPU, adapters, selftest on every adapter, each step's tables and
# exit status), tests.txt (the GPU tests that need no downloaded data, on every adapter),
# bench-vk.json (every kernel at 4096x4096: matvec batch 1 and 8, matmul 512, get_rows, matvec_id),
# peer.txt (llama.cpp's test-backend-ops on the same GPU: matvec at 4096x4096 and at 8192x65536,
# then 8 columns at 4096x4096), bench-vk-dequant.json (dequantisation to f32 and f16, 256 MiB of
# output per format: smaller sizes are bound by launch latency on such a GPU), bench-vk-int.json
# (matvec on the integer path), bench-vk-1weight.json (matvec and matmul with every call on one
# weight copy, as test-backend-ops times its cases) and bench-vk-rolled.json (matvec with rows a
# chunk per step, `--no-unroll`: against bench-vk.json's unrolled rows).
#
# What the first run on an H200 taught: test-backend-ops perf takes about 2 s per case; one weight
# copy timed alone (--rotate-mib tiny) lets the GPU's clocks drop between dispatches, so every
# timing here rotates; 8192x65536 weights took our bench over a minute for a few formats.
# NVIDIA's GL (through EGL) gives no device there ("Parent device is lost"), so nothing runs on GL.
#
# bench-vk-rows-*.json: matvec on the rows mapping (`--matvec-rows WxR`: all W invocations of a
# workgroup on R rows, x read once for them, as llama.cpp's mul_mat_vec) against the classic mapping
# (bench-vk-classic-14336.json) at 4096x14336, n = 1 and 8.
#
# Decision rules, written before the first GPU run of the rows mapping (2026-12-06; read the
# ratios as classic time / rows time per format, n = 1 at 4096x14336, rotating weights):
#   1. If 128x2 (llama.cpp's NVIDIA shape) beats the classic mapping for at least 2/3 of the formats
#      and by a median of >= 1.2x, the rows mapping becomes the default on non-CPU adapters, with the
#      shape that wins the most formats as the vendor prior (candidate 0 of the tuner).
#   2. If the best shape per format differs from 128x2 by more than 15 % for a quarter of the
#      formats or more, the tuner's candidate list keeps every shape measured here; if one shape is
#      within 5 % of the best everywhere, hard-code it per vendor and tune only the rest.
#   3. If no rows shape beats the classic mapping at n = 1 but one does at n = 8, use it for
#      n >= 2 only. If none beats it anywhere, look at scripts/gpu/isa.sh's instructions per
#      weight before changing the mapping again: the loss is then in the decoders, not the mapping.
#   4. Compare with llama.cpp (peer.txt) at 8192x65536 only (beyond L2 for both); 4096x4096 keeps
#      the peer's weight in L2.
#
#   bash scripts/gpu/suite.sh OUTDIR [SECONDS]
set -uo pipefail
out=${1:?usage: suite.sh OUTDIR [SECONDS]}
budget=${2:-400}
cd "$(dirname "$(readlink -f "$0")")/../.."
mkdir -p "$out"
log=$out/log.txt
start=$SECONDS
run=scripts/gpu/run.sh
# The test binary looks for spec/ under the directory it was built in.
if [[ -f .gpu/manifest_dir && ! -e $(cat .gpu/manifest_dir) ]]; then
    mkdir -p "$(dirname "$(cat .gpu/manifest_dir)")" && ln -s "$PWD" "$(cat .gpu/manifest_dir)"
fi

# step NAME LIMIT OUTFILE CMD...: CMD under min(LIMIT, time left), its output appended to OUTFILE.
step() {
    local name=$1 limit=$2 file=$3 t0=$SECONDS
    shift 3
    local left=$((budget - (SECONDS - start)))
    ((limit > left)) && limit=$left
    if ((limit < 10)); then
        echo "== $name: not run (time spent)" >>"$log"
        return
    fi
    note "$file" "== $name ($(date -u +%T), at most ${limit}s): $*"
    timeout -k 5 "$limit" "$@" >>"$file" 2>&1
    note "$file" "== $name: exit $? after $((SECONDS - t0))s"
}

# note FILE LINE: LINE into the log, and into FILE when that is another file.
note() {
    echo "$2" >>"$log"
    [[ $1 == "$log" ]] || echo "$2" >>"$1"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
    grep -m1 'model name' /proc/cpuinfo
    nproc
} >>"$log" 2>&1
step adapters 30 "$log" bash $run adapters
step selftest 45 "$log" bash $run selftest --backend all
step tests 60 "$out/tests.txt" env GPU_EXE=gpu-tests bash $run --test-threads 8 gpu_vs_cpu:: gpu_kquant:: \
    precision:: kernels:: recorder:: adapters:: --skip kernels_real_models
bench=(bash $run bench --backend vulkan --no-cpu -q)
mv=(--budget 0.5 --types all --dtype none --kernels matvec --shape 4096x14336 --batch 1,8)
step bench-vk-classic 35 "$log" "${bench[@]}" "${mv[@]}" --json "$out/bench-vk-classic-14336.json"
step bench-vk-rows-128x2 35 "$log" "${bench[@]}" "${mv[@]}" --matvec-rows 128x2 --json "$out/bench-vk-rows-128x2.json"
few=(--budget 0.5 --types F16,Q8_0,Q6_K,Q5_K,Q4_K,Q4_0,Q2_K,IQ2_XXS,IQ4_XS --dtype none --kernels matvec --shape 4096x14336 --batch 1,8)
for shape in 64x4 256x1 32x2; do
    step bench-vk-rows-$shape 15 "$log" "${bench[@]}" "${few[@]}" --matvec-rows $shape --json "$out/bench-vk-rows-$shape.json"
done
cases=$(mktemp)
for c in "mv 4096 4096" "mv 8192 65536" "mm8 4096 4096"; do
    # shellcheck disable=SC2086
    bash scripts/peers/llama-vulkan.sh cases $c >>"$cases"
done
[[ -x .gpu/peer/test-backend-ops ]] || echo "== peer: not staged" >>"$log"
step peer 90 "$out/peer.txt" env GPU_EXE=peer PEER_GPU_TARGET_GIB=4 bash $run perf -b Vulkan0 --test-file "$cases"
step bench-vk 100 "$log" "${bench[@]}" --types all --dtype none --kernels all --shape 4096x4096 --batch 1,8 \
    --json "$out/bench-vk.json"
step bench-vk-1weight 45 "$log" "${bench[@]}" --types all --dtype none --kernels matvec,matmul --shape 4096x4096 \
    --batch 1,8 --one-weight --json "$out/bench-vk-1weight.json"
step bench-vk-rolled 40 "$log" "${bench[@]}" --types all --dtype none --kernels matvec --shape 4096x4096 \
    --batch 1,8 --no-unroll --json "$out/bench-vk-rolled.json"
step bench-vk-dequant 45 "$log" "${bench[@]}" --types all --dtype both --mib 256 --json "$out/bench-vk-dequant.json"
step bench-vk-int 30 "$log" "${bench[@]}" --types all --dtype none --kernels matvec --shape 4096x4096 --batch 1,8 \
    --precision int8 --json "$out/bench-vk-int.json"
echo "== done after $((SECONDS - start))s" >>"$log"

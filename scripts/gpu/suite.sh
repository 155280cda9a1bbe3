#!/usr/bin/env bash
# The design run for GPU-shaped kernels (issue 41) on a lent GPU machine, in one command (stage first:
# scripts/gpu/stage.sh), steps in order of worth, each under a time limit, until SECONDS (default 400)
# are spent. With SECONDS < 200 it is a proving run: every step on small shapes and few formats, so
# that `VK_ICD_FILENAMES=<lavapipe's manifest> bash scripts/gpu/suite.sh OUT 60` here (33 s on a
# 2-core EPYC) shows each step's command and output working before a GPU's quarter hour is spent on
# it. Writes into OUTDIR:
#   log.txt          the GPU and CPU, each step's command, tables and exit status
#   adapters.json    adapter facts: subgroup sizes, limits, shader-f16, int16, cooperative-matrix shapes
#   tests.txt        the GPU tests that need no downloaded data, on every adapter
#   mv-{classic,rows128x2}-{exact,factored,int8}.json
#                    matvec n = 1 and 8 at 4096x14336 (an FFN weight, beyond L2 with the rotation),
#                    every format: today's mapping against the rows mapping, exact against factored
#                    sums and the integer path (llama.cpp's mmvq) on each
#   tune.txt, cache/ `tune --tune force --json` on two Llama-3-8B-shaped blocks (Q4_K_M mix and Q8_0,
#                    zero weights: scripts/gpu/synth_block.py), n = 1 and 8, and the tuner's cache file
#   peer.txt         llama.cpp's test-backend-ops on the same GPU: matvec at 8192x65536 every format;
#                    matvec n = 1 and 8 at 4096x14336 for the formats of the mv-big rows
#   mv-big-*.json    matvec at 14336x4096 and 8192x65536 (weights well beyond L2), a few formats
#   mv-rows-*.json   other rows shapes (64x4, 256x1, 32x2; slots 128x2s2, 64x2s4) on a few formats;
#                    mv-rows-64x2s4-nohf.json the last with binary16 converted by integer operations
#   mv-n248.json     matvec n = 2, 4, 8 on a few formats, rows 128x2 factored
#   dequant.json     dequantisation to f32 and f16, 256 MiB of output per format (with the bench's
#                    read and copy rooflines of the same device)
#   kernels.json     every kernel at 4096x4096 (matvec 1 and 8, matmul 512, get_rows, matvec_id)
#
# What the first run on an H200 taught: test-backend-ops perf takes about 2 s per case; one weight
# copy timed alone (--rotate-mib tiny) lets the GPU's clocks drop between dispatches, so every
# timing here rotates; 8192x65536 weights took our bench over a minute for a few formats.
# NVIDIA's GL (through EGL) gives no device there ("Parent device is lost"), so nothing runs on GL.
#
# Decision rules, written before the first GPU run of the rows mapping and the precision modes
# (2026-12-06; ratios are classic-exact time / variant time per format, n = 1 at 4096x14336, from
# the mv-*.json files of one run):
#   1. If rows 128x2 (llama.cpp's NVIDIA shape) beats the classic mapping for at least 2/3 of the
#      formats and by a median of >= 1.2x, the rows mapping becomes the default on non-CPU adapters,
#      with the shape that wins the most formats as the vendor prior (candidate 0 of the tuner).
#   2. If the best shape per format differs from 128x2 by more than 15 % for a quarter of the
#      formats or more, the tuner's candidate list keeps every shape measured here; if one shape is
#      within 5 % of the best everywhere, hard-code it per vendor and tune only the rest.
#   3. If no rows shape beats the classic mapping at n = 1 but one does at n = 8, use it for
#      n >= 2 only. If none beats it anywhere, look at scripts/gpu/isa.sh's instructions per
#      weight before changing the mapping again: the loss is then in the decoders, not the mapping.
#   4. factored against exact (same mapping): where factored is >= 1.1x faster for a format, the
#      tuner may offer it as a candidate when the caller's precision allows it (never by default:
#      `exact` stays the default mode); where it is within 5 %, the decoders are not the limit and
#      factored buys nothing there. int8 the same against factored (each mapping against its own);
#      an int8 slower than exact on a GPU with integer dot products means x's quantisation pass
#      costs more than it saves at n = 1.
#   5. Against the read ceiling (each row's ratio_to_copy): a 4-bit format below 55 % or an 8-bit
#      one below 60 % at its best variant is decoder-bound: the next work is its decoder (word
#      loads, the exact int-to-float), read beside isa.sh's instructions per weight for it.
#   6. Compare with llama.cpp (peer.txt) at 8192x65536 and 4096x14336 only (beyond L2 for both);
#      4096x4096 keeps the peer's weight in L2.
#   7. Slots (written 2026-12-07, before any GPU ran them; isa.sh gives 20-35 % fewer instructions
#      per weight with slots of 4 than of 1 on AMD): if rows 128x2s2 or 64x2s4 is >= 1.1x faster
#      than rows 128x2 (mv-rows-*.json against mv-rows128x2-exact.json, n = 1) for most of the few
#      formats, the faster slotted shape becomes the rows prior and rule 1 is read with it. If the
#      slots are slower despite the instruction counts, the loss is in memory access (a subgroup's
#      loads S chunks apart): keep slots of 2 for the k-quants only and take the next step in the
#      decoders instead.
#   8. binary16 by the device (written 2026-12-07, before any GPU ran it; isa.sh gives F16
#      0.23-0.53x and the block formats 0.69-0.97x the instructions per weight): every row of the
#      runs above carries `.hf` where the engine's probe found the GPU's conversion exact (if a row
#      lacks it on a GPU, the probe failed there: log it as a finding). mv-rows-64x2s4-nohf.json is
#      mv-rows-64x2s4.json with the integer conversion; where it is >= 1.05x faster for a block
#      format, the scales' default (`MatVecPolicy::hw_f16_scales`) goes off for that vendor; F16
#      slower with `.hf` means the conversion is not the limit there (read ratio_to_copy).
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

# step NAME LIMIT OUTFILE CMD...: CMD under min(LIMIT, time left), its output appended to OUTFILE;
# not run when less than $floor seconds are left.
step() {
    local name=$1 limit=$2 file=$3 t0=$SECONDS
    shift 3
    local left=$((budget - (SECONDS - start)))
    ((limit > left)) && limit=$left
    if ((limit < floor)); then
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
# Shapes and formats: a GPU's run, or (SECONDS < 200) a proving run, e.g. on lavapipe: every step
# on small shapes and few formats, so that each one's command and output are known to work.
if ((budget >= 200)); then
    tests=(gpu_vs_cpu:: gpu_kquant:: precision:: kernels:: recorder:: adapters:: tuner:: --skip kernels_real_models)
    mv_shape=4096x14336 big_shapes=(14336x4096 8192x65536) k_shape=4096x4096 all=all mib=256 floor=10
    few_types=F16,Q8_0,Q6_K,Q5_K,Q4_K,Q4_0,Q2_K,IQ2_XXS,IQ4_XS tune_sel=() rot=() n=1,8
else
    tests=(adapters:: precision::kernels_precision_int8_shared_scratch)
    mv_shape=256x1024 big_shapes=(1024x256) k_shape=256x256 all=Q4_K,Q8_0,F16 mib=1 floor=3
    few_types=Q8_0 tune_sel=(--tensor blk.1.attn_k.weight) rot=(--rotate-mib 1) n=1
fi

step adapters 30 "$log" bash $run adapters
timeout 30 bash $run adapters --json >"$out/adapters.json" 2>>"$log"
step selftest 45 "$log" bash $run selftest --backend all
step tests 60 "$out/tests.txt" env GPU_EXE=gpu-tests bash $run --test-threads 8 "${tests[@]}"
bench=(bash $run bench --backend vulkan --no-cpu -q "${rot[@]}")
mv=(--budget 0.5 --types "$all" --dtype none --kernels matvec --shape "$mv_shape" --batch "$n")
step mv-classic-exact 35 "$log" "${bench[@]}" "${mv[@]}" --json "$out/mv-classic-exact.json"
step mv-rows128x2-exact 35 "$log" "${bench[@]}" "${mv[@]}" --variant rows:128x2 --json "$out/mv-rows128x2-exact.json"
step mv-rows128x2-factored 30 "$log" "${bench[@]}" "${mv[@]}" --variant rows:128x2 --precision factored \
    --json "$out/mv-rows128x2-factored.json"
step mv-classic-factored 30 "$log" "${bench[@]}" "${mv[@]}" --precision factored --json "$out/mv-classic-factored.json"
step mv-classic-int8 30 "$log" "${bench[@]}" "${mv[@]}" --precision int8 --json "$out/mv-classic-int8.json"
step mv-rows128x2-int8 30 "$log" "${bench[@]}" "${mv[@]}" --variant rows:128x2 --precision int8 \
    --json "$out/mv-rows128x2-int8.json"
if [[ -f .gpu/synth.gguf.xz ]]; then
    [[ -f .gpu/synth.gguf ]] || xz -dc .gpu/synth.gguf.xz >.gpu/synth.gguf
    step tune 30 "$out/tune.txt" env GGUF_DEQUANT_CACHE="$out/cache" bash $run tune .gpu/synth.gguf --backend vulkan \
        --tune force --batch "$n" --budget-ms 8000 --json "${tune_sel[@]}"
else
    echo "== tune: not staged (no .gpu/synth.gguf.xz)" >>"$log"
fi
cases=$(mktemp)
if ((budget >= 200)); then
    peer_gib=4
    bash scripts/peers/llama-vulkan.sh cases mv 8192 65536 >>"$cases"
    for c in "mv 4096 14336" "mm8 4096 14336"; do
        # shellcheck disable=SC2086
        PEER_TYPES=f16,q8_0,q6_K,q5_K,q4_K,q4_0,q2_K,iq2_xxs,iq4_xs bash scripts/peers/llama-vulkan.sh cases $c >>"$cases"
    done
else
    # The proving run: two small cases, so that the steps after it run too.
    peer_gib=0.01
    PEER_TYPES=q4_K,q8_0 bash scripts/peers/llama-vulkan.sh cases mv 256 1024 >>"$cases"
fi
if [[ -x .gpu/peer/test-backend-ops ]]; then
    step peer 100 "$out/peer.txt" env GPU_EXE=peer PEER_GPU_TARGET_GIB=$peer_gib bash $run perf -b Vulkan0 --test-file "$cases"
else
    echo "== peer: not staged" >>"$log"
fi
few=(--budget 0.5 --types "$few_types" --dtype none --kernels matvec)
for shape in "${big_shapes[@]}"; do
    step mv-big-$shape-classic 25 "$log" "${bench[@]}" "${few[@]}" --shape "$shape" --batch 1 \
        --json "$out/mv-big-$shape-classic.json"
    step mv-big-$shape-rows 25 "$log" "${bench[@]}" "${few[@]}" --shape "$shape" --batch 1 --variant rows:128x2 \
        --precision factored --json "$out/mv-big-$shape-rows.json"
done
for shape in 64x4 256x1 32x2 128x2s2 64x2s4; do
    step mv-rows-$shape 15 "$log" "${bench[@]}" "${few[@]}" --shape "$mv_shape" --batch "$n" --variant rows:$shape \
        --json "$out/mv-rows-$shape.json"
done
step mv-rows-64x2s4-nohf 15 "$log" "${bench[@]}" "${few[@]}" --shape "$mv_shape" --batch "$n" --variant rows:64x2s4 \
    --no-hw-f16 --json "$out/mv-rows-64x2s4-nohf.json"
step mv-n248 20 "$log" "${bench[@]}" "${few[@]}" --shape "$mv_shape" --batch 2,4,8 --variant rows:128x2 \
    --precision factored --json "$out/mv-n248.json"
step dequant 45 "$log" "${bench[@]}" --types "$all" --dtype both --mib "$mib" --json "$out/dequant.json"
step kernels 100 "$log" "${bench[@]}" --types "$all" --dtype none --kernels all --shape "$k_shape" --batch 1,8 \
    --json "$out/kernels.json"
echo "== done after $((SECONDS - start))s" >>"$log"

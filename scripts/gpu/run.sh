#!/usr/bin/env bash
# Runs a staged build (scripts/gpu/stage.sh) on a machine with an NVIDIA GPU: unpacks the bundle and,
# where the system has no Vulkan loader, Debian's loader packages; points the loader at the NVIDIA
# driver's manifests; then runs `gguf-dequant ARGS` (or, with GPU_EXE=gpu-tests, the GPU test binary;
# GPU_EXE=peer, llama.cpp's test-backend-ops).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
[[ -f .gpu/bundle.tar.xz ]] || { echo "error: no .gpu/bundle.tar.xz (run scripts/gpu/stage.sh first)" >&2; exit 1; }
[[ -d .gpu/bin ]] || tar -C .gpu -xJf .gpu/bundle.tar.xz
if ! ldconfig -p | grep -q libvulkan.so.1; then
    for f in .gpu/debs/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
    /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; do
    if [[ -f $icd ]]; then export VK_DRIVER_FILES=$icd; break; fi
done
for egl in /usr/share/glvnd/egl_vendor.d/10_nvidia.json /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; do
    if [[ -f $egl ]]; then export __EGL_VENDOR_LIBRARY_FILENAMES=$egl; break; fi
done
case ${GPU_EXE:-gguf-dequant} in
peer)
    lib=$PWD/.gpu/peer
    ldconfig -p | grep -q libgomp.so.1 || lib=$lib:$PWD/.gpu/peer/fallback
    export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
    exec .gpu/peer/test-backend-ops "$@"
    ;;
*) exec ".gpu/bin/${GPU_EXE:-gguf-dequant}" "$@" ;;
esac

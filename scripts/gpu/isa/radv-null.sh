#!/usr/bin/env bash
# radv-null.sh [DIR]: puts Mesa 25 (Debian bookworm-backports' mesa-vulkan-drivers and the libdrm 2.4.12x it
# needs; the other libraries it links, libllvm15 among them, are bookworm's, as the system's Mesa 22.3 has them)
# under DIR (default ${GGUF_DEQUANT_CACHE:-~/.cache/gguf-dequant}/radv-null) without touching the system's Mesa
# or its apt sources (apt-get runs on a private sources list and package lists inside DIR), builds
# shaderstats.c beside this script there, and prints the environment that points the Vulkan loader at RADV's
# compile-only null device (x86-64 Debian 12):
#
#   eval "$(bash scripts/gpu/isa/radv-null.sh)"
#   RADV_FORCE_FAMILY=navi31 "$SHADERSTATS" kernel.spv matvec
#
# RADV_FORCE_FAMILY picks the chip: navi21 (RDNA2), navi31 (RDNA3), gfx1201 (RDNA4), gfx940 (CDNA3, MI300),
# vega10 (GCN5). Mesa 22.3 (bookworm itself) crashes on that device; 25.0 works. Idempotent: a second run
# only prints the environment. Needs gcc and the Vulkan headers and loader (apt-get install gcc
# libvulkan-dev, done here when run as root).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
D=${1:-${GGUF_DEQUANT_CACHE:-$HOME/.cache/gguf-dequant}/radv-null}
mkdir -p "$D" && D=$(cd "$D" && pwd)
L=$D/unpacked/usr/lib/x86_64-linux-gnu
log() { echo "[radv-null] $*" >&2; }

if [[ ! -f $L/libvulkan_radeon.so ]]; then
    # The machine's own Debian mirror, as its apt sources name it.
    uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | grep -v security | head -1 | awk '{print $2}' || true)
    [[ -n $uri ]] || uri=$(grep -hs '^deb ' /etc/apt/sources.list | grep -v security | head -1 | awk '{print $2}' || true)
    [[ -n $uri ]] || uri=http://deb.debian.org/debian
    A=$D/apt
    mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$D/debs"
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s bookworm main\ndeb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s bookworm-backports main\n' \
        "$uri" "$uri" >"$A/sources.list"
    opts=(-o "Dir::Etc::SourceList=$A/sources.list" -o "Dir::Etc::SourceParts=-"
          -o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache" -o "Debug::NoLocking=1"
          -o "APT::Sandbox::User=root")
    log "apt-get update (private sources and lists in $A)"
    apt-get "${opts[@]}" update -qq >&2
    # The driver and the libdrm it needs (2.4.121 or newer); everything else it links (libllvm15, libelf,
    # libzstd, the X and Wayland client libraries) is bookworm's, as the system's Mesa 22.3 has it.
    (cd "$D/debs" && apt-get "${opts[@]}" -qq download mesa-vulkan-drivers/bookworm-backports \
        libdrm2/bookworm-backports libdrm-amdgpu1/bookworm-backports >&2)
    for p in "$D"/debs/*.deb; do dpkg-deb -x "$p" "$D/unpacked"; done
    missing=$(LD_LIBRARY_PATH=$L ldd "$L/libvulkan_radeon.so" | awk '/not found/ {print $1}' || true)
    if [[ -n $missing ]]; then
        log "libvulkan_radeon.so needs libraries this system lacks: $missing (apt-get install mesa-vulkan-drivers brings them)"
        rm -f "$L/libvulkan_radeon.so"
        exit 1
    fi
fi

if ! command -v gcc >/dev/null || [[ ! -f /usr/include/vulkan/vulkan_core.h ]] || ! ldconfig -p | grep -q 'libvulkan.so '; then
    [[ $(id -u) -eq 0 ]] || { log "missing gcc or libvulkan-dev: sudo apt-get install gcc libvulkan-dev"; exit 1; }
    log "apt-get install gcc libvulkan-dev"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libvulkan-dev >/dev/null
fi
if [[ ! -x $D/shaderstats || $here/shaderstats.c -nt $D/shaderstats ]]; then
    gcc -O2 -Wall -o "$D/shaderstats" "$here/shaderstats.c" -lvulkan
fi
mkdir -p "$D/icd"
sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$L/libvulkan_radeon.so\"#" \
    "$D/unpacked/usr/share/vulkan/icd.d/radeon_icd.x86_64.json" 2>/dev/null >"$D/icd/radeon.json" ||
    sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$L/libvulkan_radeon.so\"#" \
        "$D"/unpacked/usr/share/vulkan/icd.d/radeon_icd*.json >"$D/icd/radeon.json"
echo "export LD_LIBRARY_PATH=$L VK_ICD_FILENAMES=$D/icd/radeon.json VK_DRIVER_FILES=$D/icd/radeon.json XDG_RUNTIME_DIR=\${XDG_RUNTIME_DIR:-/tmp} SHADERSTATS=$D/shaderstats"

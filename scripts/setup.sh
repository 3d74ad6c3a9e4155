#!/usr/bin/env bash
# Sets chimera up on a fresh Debian 12 machine and runs the main job:
#   1. installs the Debian packages the build needs (apt-get; needs root or sudo),
#   2. builds Release into build/ (binary: build/chimera; libraries: build/libchimera.so, .a),
#   3. generates a story from the real TinyStories model in ../shared (greedy).
# Set CHIMERA_SKIP_APT=1 to skip step 1, CHIMERA_SHARED to point at the shared data.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: hash paths relative to the checkout so fresh clones reuse the cache.
export CCACHE_BASEDIR="$PWD"

PACKAGES=(build-essential cmake ninja-build ccache pkg-config git
          libhwy-dev nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libcli11-dev
          libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev python3
          python3-pytest chromium)

if [[ "${CHIMERA_SKIP_APT:-0}" != "1" ]]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if (( ${#missing[@]} )); then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build chimera chimera_shared chimera_static  # CLI, libchimera.so, libchimera.a

SHARED="${CHIMERA_SHARED:-../shared}"
MODEL="$SHARED/models/stories260K.gguf"
if [[ ! -f "$MODEL" ]]; then
  echo "setup: built build/chimera; $MODEL not found, so the demo story is skipped" >&2
  exit 0
fi
echo "setup: build/chimera run -m $MODEL -p \"Once upon a time\" -n 64 --temp 0" >&2
build/chimera run -m "$MODEL" -p "Once upon a time" -n 64 --temp 0

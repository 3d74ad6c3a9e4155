#!/usr/bin/env bash
# Builds chimera (Release, with tests) and runs the whole test suite:
# unit and kernel sweeps on every ISA the CPU runs, golden model cases from
# ../shared (skipped, never passed, when absent), tokenizer vectors, CLI error
# cases, then bounded libFuzzer runs of the GGUF reader and the HTTP request path
# (CHIMERA_FUZZ_SECONDS in all, default 30, split between them).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: hash paths relative to the checkout so fresh clones reuse the cache.
export CCACHE_BASEDIR="$PWD"
JOBS="${CHIMERA_JOBS:-$(nproc)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS" --timeout 600
if [[ -x scripts/fuzz.sh ]]; then
  scripts/fuzz.sh "${CHIMERA_FUZZ_SECONDS:-30}"
fi

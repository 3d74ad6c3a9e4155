#!/usr/bin/env bash
# Token agreement and speed-up of each diffusion acceleration (prefix cache,
# dual cache, dual cache with refresh, threshold parallel decoding and their
# combinations) against the exact run, on tiny-llada with a fixed set of 8
# prompts: the table in docs/DIFFUSION.md ("Agreement and speed-up").
#
#   scripts/bench_diffusion_agreement.sh [-B BUILD_DIR=build] [--tau 0.9] [--gen 128] [--block 32]
#
# The measurement is the disabled GoogleTest DiffusionBench.DISABLED_AgreementAndSpeed
# (tests/runtime/diffusion_test.cpp); golden data comes from $CHIMERA_SHARED
# (else ../shared). Steps = gen (one token per step), T = 0, low_confidence.
# "model rows" counts canvas positions run through the network, the machine-
# independent part of the speed-up; wall times depend on the machine's load.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build; TAU=0.9; GEN=128; BLOCK=32
while [[ $# -gt 0 ]]; do
  case "$1" in
    -B) BUILD="$2"; shift 2;; --tau) TAU="$2"; shift 2;; --gen) GEN="$2"; shift 2;; --block) BLOCK="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 1;;
  esac
done
ninja -C "$BUILD" test_runtime > /dev/null
export CHIMERA_SHARED="${CHIMERA_SHARED:-$(cd .. && pwd)/shared}"
DLM_TAU="$TAU" DLM_GEN="$GEN" DLM_BLOCK="$BLOCK" "$BUILD/tests/test_runtime" --gtest_also_run_disabled_tests \
    --gtest_filter='DiffusionBench.DISABLED_AgreementAndSpeed' | grep -E '^(\||gen )'

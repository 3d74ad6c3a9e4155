#!/usr/bin/env bash
# Bounded libFuzzer session for the GGUF reader.
#   scripts/fuzz.sh [SECONDS]     (default 30)
# Builds fuzz/gguf_fuzzer with clang (-fsanitize=fuzzer,address,undefined) in
# build-fuzz/ — only the core and GGUF sources are compiled — writes the seed
# corpus (build-fuzz/seeds, plus $CHIMERA_FUZZ_CORPUS / build*/fuzz-corpus left
# by the tests when present), then fuzzes for SECONDS with inputs up to 64 KiB.
# The growing corpus is kept in build-fuzz/corpus; crashes land in
# build-fuzz/artifacts/. Exit status: 0 clean, non-zero on a crash, a leak, a
# timeout (> 10 s per input), an allocation over 256 MiB or a build failure.
# Environment: CHIMERA_FUZZ_JOBS (parallel fuzzing jobs, default 1),
# CHIMERA_FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail

SECONDS_TO_RUN="${1:-30}"
if ! [[ "$SECONDS_TO_RUN" =~ ^[0-9]+$ ]] || [ "$SECONDS_TO_RUN" -lt 1 ]; then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-fuzz"
CXX="${CHIMERA_FUZZ_CXX:-$(command -v clang++ || true)}"
CC="${CHIMERA_FUZZ_CC:-$(command -v clang || true)}"
if [ -z "$CXX" ] || [ -z "$CC" ]; then
  echo "error: clang/clang++ not found (libFuzzer needs clang)" >&2
  exit 1
fi

GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
    -DCHIMERA_FUZZ=ON -DCHIMERA_BUILD_TESTS=OFF -DCHIMERA_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" --target gguf_fuzzer gguf_seeds -j "${CHIMERA_FUZZ_BUILD_JOBS:-2}"

mkdir -p "$BUILD/corpus" "$BUILD/artifacts"
"$BUILD/gguf_seeds" "$BUILD/seeds" >/dev/null

DIRS=("$BUILD/corpus" "$BUILD/seeds")
for extra in "${CHIMERA_FUZZ_CORPUS:-}" "$ROOT"/build*/fuzz-corpus; do
  if [ -n "$extra" ] && [ -d "$extra" ] && [ "$extra" != "$BUILD/corpus" ]; then DIRS+=("$extra"); fi
done

JOBS="${CHIMERA_FUZZ_JOBS:-1}"
PAR=()
if [ "$JOBS" -gt 1 ]; then PAR=(-fork="$JOBS"); fi

echo "fuzzing gguf_fuzzer for ${SECONDS_TO_RUN}s (corpus: ${DIRS[*]})"
# Only the first directory (build-fuzz/corpus) receives new inputs.
set +e
# shellcheck disable=SC2086
"$BUILD/gguf_fuzzer" "${DIRS[@]}" \
  -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -malloc_limit_mb=256 \
  -artifact_prefix="$BUILD/artifacts/" -print_final_stats=1 \
  "${PAR[@]}" ${CHIMERA_FUZZ_ARGS:-}
status=$?
set -e
echo "fuzz session finished (exit $status)"
exit $status

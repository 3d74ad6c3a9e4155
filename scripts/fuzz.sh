#!/usr/bin/env bash
# Bounded libFuzzer sessions for the GGUF reader and the HTTP request path.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (default 30 s in all, split evenly
#                                            between gguf_fuzzer and http_fuzzer)
# Builds the targets with clang (-fsanitize=fuzzer,address,undefined) in
# build-fuzz/ — each compiles only the sources it needs — then fuzzes each for
# its share of SECONDS with inputs up to 64 KiB.
# gguf_fuzzer: seeds written by gguf_seeds (build-fuzz/seeds), plus
# $CHIMERA_FUZZ_CORPUS / build*/fuzz-corpus left by the tests when present.
# http_fuzzer: raw HTTP requests -> request parser -> OpenAI JSON validation ->
# chat-template rendering; seeds in fuzz/http_seeds.
# Each target's growing corpus is kept in build-fuzz/corpus[-http]; crashes
# land in build-fuzz/artifacts/. Exit status: 0 clean, non-zero on a crash, a
# leak, a timeout (> 10 s per input), an allocation over 256 MiB or a build
# failure. Environment: CHIMERA_FUZZ_JOBS (parallel fuzzing jobs, default 1),
# CHIMERA_FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail

SECONDS_TO_RUN="${1:-30}"
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then TARGETS=(gguf_fuzzer http_fuzzer); fi
if ! [[ "$SECONDS_TO_RUN" =~ ^[0-9]+$ ]] || [ "$SECONDS_TO_RUN" -lt 1 ]; then
  echo "usage: $0 [SECONDS] [gguf_fuzzer|http_fuzzer ...]" >&2
  exit 2
fi
for t in "${TARGETS[@]}"; do
  case "$t" in gguf_fuzzer | http_fuzzer) ;; *) echo "error: unknown fuzz target '$t'" >&2; exit 2 ;; esac
done
PER_TARGET=$(( SECONDS_TO_RUN / ${#TARGETS[@]} ))
if [ "$PER_TARGET" -lt 1 ]; then PER_TARGET=1; fi

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
cmake --build "$BUILD" --target "${TARGETS[@]}" gguf_seeds -j "${CHIMERA_FUZZ_BUILD_JOBS:-2}"

mkdir -p "$BUILD/artifacts"
JOBS="${CHIMERA_FUZZ_JOBS:-1}"
PAR=()
if [ "$JOBS" -gt 1 ]; then PAR=(-fork="$JOBS"); fi

status=0
for target in "${TARGETS[@]}"; do
  if [ "$target" = gguf_fuzzer ]; then
    mkdir -p "$BUILD/corpus"
    "$BUILD/gguf_seeds" "$BUILD/seeds" >/dev/null
    DIRS=("$BUILD/corpus" "$BUILD/seeds")
    for extra in "${CHIMERA_FUZZ_CORPUS:-}" "$ROOT"/build*/fuzz-corpus; do
      if [ -n "$extra" ] && [ -d "$extra" ] && [ "$extra" != "$BUILD/corpus" ]; then DIRS+=("$extra"); fi
    done
  else
    mkdir -p "$BUILD/corpus-http"
    DIRS=("$BUILD/corpus-http" "$ROOT/fuzz/http_seeds")
  fi
  echo "fuzzing $target for ${PER_TARGET}s (corpus: ${DIRS[*]})"
  # Only the first directory receives new inputs.
  set +e
  # shellcheck disable=SC2086
  "$BUILD/$target" "${DIRS[@]}" \
    -max_total_time="$PER_TARGET" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=256 \
    -artifact_prefix="$BUILD/artifacts/" -print_final_stats=1 \
    "${PAR[@]}" ${CHIMERA_FUZZ_ARGS:-}
  rc=$?
  set -e
  echo "$target session finished (exit $rc)"
  if [ $rc -ne 0 ]; then status=$rc; fi
done
exit $status

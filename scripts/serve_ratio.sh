#!/usr/bin/env bash
# Issue 19's serving figure: output tok/s with 8 concurrent streams over the
# single-stream rate, measured as K alternating 1-stream / 8-stream pairs per
# model (the host's speed drifts; one pair cannot decide a ratio near 3x).
#
#   scripts/serve_ratio.sh [-c CHIMERA] [-k K] [-o OUTPUT_LEN] [-t THREADS] MODEL.gguf...
#
# One `chimera serve --parallel 8 -c 512 --no-prefix-cache` per model; per
# pair `chimera bench serve --input-len 16` with 4 requests at concurrency 1,
# then 16 at concurrency 8 (seed = pair number). Prints one line per pair and
# the median ratio with its range per model.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHIMERA=$ROOT/build/chimera
K=3
OLEN=128
THREADS=2
while [[ $# -gt 0 ]]; do
  case $1 in
    -c) CHIMERA=$2; shift 2 ;;
    -k) K=$2; shift 2 ;;
    -o) OLEN=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || { echo "usage: $0 [-c CHIMERA] [-k K] [-o OUTPUT_LEN] [-t THREADS] MODEL.gguf..." >&2; exit 2; }
PORT=$((18000 + RANDOM % 2000))
TMP=$(mktemp -d /tmp/serve-ratio.XXXXXX)
SERVER=""
trap '[[ -n $SERVER ]] && kill $SERVER 2>/dev/null; rm -rf "$TMP"' EXIT

out_tps() {  # output tok/s from a bench serve result file
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_throughput"])' "$1"
}

for MODEL in "$@"; do
  name=$(basename "$MODEL" .gguf)
  "$CHIMERA" serve -m "$MODEL" --port $PORT --threads "$THREADS" -c 512 --parallel 8 --no-prefix-cache \
    >"$TMP/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 600); do
    python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
      "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 $SERVER 2>/dev/null || { cat "$TMP/server.log" >&2; exit 1; }
    sleep 0.1
  done
  ratios=()
  for i in $(seq "$K"); do
    "$CHIMERA" bench serve --url "http://127.0.0.1:$PORT" --input-len 16 --output-len "$OLEN" \
      --num-prompts 4 --concurrency 1 --seed "$i" --result-file "$TMP/c1.json" >/dev/null 2>&1
    "$CHIMERA" bench serve --url "http://127.0.0.1:$PORT" --input-len 16 --output-len "$OLEN" \
      --num-prompts 16 --concurrency 8 --seed "$i" --result-file "$TMP/c8.json" >/dev/null 2>&1
    t1=$(out_tps "$TMP/c1.json"); t8=$(out_tps "$TMP/c8.json")
    r=$(python3 -c "print(f'{$t8/$t1:.2f}')")
    ratios+=("$r")
    printf '%s pair %d: 1 stream %.1f tok/s, 8 streams %.1f tok/s, %sx\n' "$name" "$i" "$t1" "$t8" "$r"
  done
  kill $SERVER; wait $SERVER 2>/dev/null || true; SERVER=""
  python3 -c 'import sys,statistics as s; v=[float(x) for x in sys.argv[2:]]; print(f"{sys.argv[1]}: median {s.median(v):.2f}x ({min(v):.2f}-{max(v):.2f}) over {len(v)} pairs")' "$name" "${ratios[@]}"
done

#!/usr/bin/env bash
# `chimera bench serve` table for docs/PERFORMANCE.md: one `chimera serve` per
# concurrency level on a Granite-4.0-H-shaped GGUF (default: the full-depth
# granite-4.0-h-tiny Q4_K_M made by `chimera synth`), random token-id prompts of
# INPUT_LEN tokens, OUTPUT_LEN generated tokens each (ignore_eos, greedy).
#
#   scripts/bench_serve.sh [-m MODEL] [-c CHIMERA] [-C "1 4 16"] [-i 1024] [-o 128]
#       [-N NUM_PROMPTS (default: 2 x concurrency, at least 5)] [-t THREADS] [-d OUT_DIR]
#
# Makes the model when it is missing:
#   chimera synth --like granite-4.0-h-tiny --type Q4_K_M -o MODEL
# Each level gets a fresh server (--parallel = concurrency, context =
# input + output + 16, prefix cache off so random prompts measure real
# prefill) and writes OUT_DIR/serve-cC.{log,json}; a markdown table of the
# vllm-style metrics is printed at the end.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=/work/bench-models/granite-4.0-h-tiny-Q4_K_M.gguf
CHIMERA=$ROOT/build/chimera
CONCS="1 4 16"
IN=1024
OUT=128
NUM=""
THREADS=$(nproc)
DIR=$(mktemp -d /tmp/bench-serve.XXXXXX)
while [[ $# -gt 0 ]]; do
  case $1 in
    -m) MODEL=$2; shift 2 ;;
    -c) CHIMERA=$2; shift 2 ;;
    -C) CONCS=$2; shift 2 ;;
    -i) IN=$2; shift 2 ;;
    -o) OUT=$2; shift 2 ;;
    -N) NUM=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    -d) DIR=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$DIR"
[[ -x $CHIMERA ]] || { echo "no chimera binary at $CHIMERA (-c)" >&2; exit 1; }
if [[ ! -f $MODEL ]]; then
  echo "making $MODEL" >&2
  "$CHIMERA" synth --like granite-4.0-h-tiny --type Q4_K_M -o "$MODEL"
fi
CTX=$((IN + OUT + 16))

SERVER_PID=""
cleanup() {
  if [[ -n $SERVER_PID ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || echo "(server exit status $?)" >&2
  fi
}
trap cleanup EXIT

for C in $CONCS; do
  N=${NUM:-$((2 * C > 5 ? 2 * C : 5))}
  LOG=$DIR/serve-c$C.log
  "$CHIMERA" serve -m "$MODEL" --host 127.0.0.1 --port 0 --threads "$THREADS" -c "$CTX" --parallel "$C" \
    --prefill-chunk 512 --no-prefix-cache >"$LOG" 2>&1 &
  SERVER_PID=$!
  PORT=""
  for _ in $(seq 1 600); do
    PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$LOG" | head -1)
    [[ -n $PORT ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
    sleep 0.5
  done
  [[ -n $PORT ]] || { echo "server did not start" >&2; cat "$LOG" >&2; exit 1; }
  echo "== concurrency $C: $N prompts x ($IN in, $OUT out), $THREADS threads" >&2
  "$CHIMERA" bench serve --url "http://127.0.0.1:$PORT" --input-len "$IN" --output-len "$OUT" \
    --num-prompts "$N" --concurrency "$C" --result-file "$DIR/serve-c$C.json" | tee "$DIR/serve-c$C.txt"
  cleanup
  SERVER_PID=""
done

echo
echo "model: $MODEL ($(du -h "$MODEL" | cut -f1)), input $IN, output $OUT, threads $THREADS"
python3 - "$DIR" $CONCS <<'PY'
import json, sys
d, concs = sys.argv[1], sys.argv[2:]
flat = lambda r: {**{k: v for k, v in r.items() if not isinstance(v, dict)},
                  **{f"{k}.{s}": v for k, d in r.items() if isinstance(d, dict) for s, v in d.items()}}
keys = [("completed", "ok"), ("failed", "failed"), ("duration_s", "duration s"), ("request_throughput", "req/s"),
        ("output_throughput", "out tok/s"), ("total_token_throughput", "total tok/s"),
        ("ttft_ms.mean", "TTFT mean ms"), ("ttft_ms.median", "TTFT med ms"), ("ttft_ms.p99", "TTFT p99 ms"),
        ("tpot_ms.mean", "TPOT mean ms"), ("tpot_ms.median", "TPOT med ms"), ("tpot_ms.p99", "TPOT p99 ms"),
        ("itl_ms.mean", "ITL mean ms"), ("itl_ms.p99", "ITL p99 ms"), ("e2el_ms.mean", "E2E mean ms")]
rows = []
for c in concs:
    try:
        rows.append((c, flat(json.load(open(f"{d}/serve-c{c}.json")))))
    except Exception as e:
        print(f"concurrency {c}: no result ({e})")
print("| concurrency | " + " | ".join(h for _, h in keys) + " |")
print("|---|" + "---|" * len(keys))
for c, r in rows:
    cells = []
    for k, _ in keys:
        v = r.get(k, "")
        cells.append(f"{v:.2f}" if isinstance(v, float) else str(v))
    print(f"| {c} | " + " | ".join(cells) + " |")
PY

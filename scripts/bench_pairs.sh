#!/usr/bin/env bash
# Alternating pairs: llama-bench then chimera bench on the same GGUF, ROUNDS
# times, each a short run; prints every pair and the median of the per-pair
# ratios. For a machine whose memory bandwidth drifts between runs (shared
# hosts): a pair is measured within seconds, so its ratio is meaningful even
# when the absolute numbers move.
#   scripts/bench_pairs.sh LLAMA_CPP_BIN_DIR MODEL.gguf [-p 0] [-n 64] [-r 2] [-t 2] [-k 5]
# (-p > 0 measures prefill pp<p>, else decode tg<n>; -k rounds.)
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_BIN="$1"; MODEL="$2"; shift 2
P=0; N=64; R=2; T=2; K=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) P="$2"; shift 2;; -n) N="$2"; shift 2;; -r) R="$2"; shift 2;; -t) T="$2"; shift 2;; -k) K="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 1;;
  esac
done
if [[ "$P" -gt 0 ]]; then N=0; fi
for ((i = 1; i <= K; i++)); do
  l=$("$LLAMA_BIN/llama-bench" -m "$MODEL" -p "$P" -n "$N" -r "$R" -t "$T" -o json 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])')
  c=$(build/chimera bench -m "$MODEL" -p "$P" -n "$N" -r "$R" --threads "$T" --no-probe -o json 2>/dev/null |
      python3 -c 'import json,sys; d=json.load(sys.stdin); d=d[0] if isinstance(d,list) else d; print(d["prefill_tok_s"] if '"$P"' > 0 else d["decode_tok_s"])')
  echo "$l $c"
done | python3 -c '
import sys, statistics
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
for i, (l, c) in enumerate(rows, 1):
    print(f"pair {i}: llama.cpp {l:.2f}  chimera {c:.2f}  ratio {c / l:.3f}")
r = [c / l for l, c in rows]
print(f"median ratio {statistics.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f}, {len(r)} pairs)")
'

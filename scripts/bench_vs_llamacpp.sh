#!/usr/bin/env bash
# Side-by-side throughput of chimera and llama.cpp on the same GGUF files, in
# one run (alternating tools per model so both see the same machine state).
#   scripts/bench_vs_llamacpp.sh LLAMA_CPP_BIN_DIR [-p 512] [-n 128] [-r 3] [-t 2] MODEL.gguf...
# llama.cpp is built from source outside this repository (never committed).
# Prints a markdown table: prefill/decode tok/s for both, the ratio
# chimera / llama.cpp, and chimera's decode bandwidth as % of the probe.
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_BIN="$1"; shift
P=512; N=128; R=3; T=2
while [[ $# -gt 0 && "$1" == -* ]]; do
  case "$1" in
    -p) P="$2"; shift 2;; -n) N="$2"; shift 2;; -r) R="$2"; shift 2;; -t) T="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 1;;
  esac
done
TMP=$(mktemp -d)
for M in "$@"; do
  name=$(basename "$M")
  "$LLAMA_BIN/llama-bench" -m "$M" -p "$P" -n "$N" -r "$R" -t "$T" -o json > "$TMP/$name.llama.json" 2>/dev/null
  build/chimera bench -m "$M" -p "$P" -n "$N" -r "$R" --threads "$T" -o json > "$TMP/$name.chimera.json" 2>/dev/null
done
python3 - "$TMP" "$P" "$N" "$@" <<'PY'
import json, os, sys
tmp, P, N, models = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
print(f"| model | size MiB | llama.cpp pp{P} | chimera pp{P} | ratio | llama.cpp tg{N} | chimera tg{N} | ratio | chimera decode GB/s | % of probe bw |")
print("|---|---|---|---|---|---|---|---|---|---|")
for m in models:
    name = os.path.basename(m)
    ll = json.load(open(f"{tmp}/{name}.llama.json"))
    ch = json.load(open(f"{tmp}/{name}.chimera.json"))
    lpp = next((r["avg_ts"] for r in ll if r["n_prompt"] > 0 and r["n_gen"] == 0), 0.0)
    ltg = next((r["avg_ts"] for r in ll if r["n_gen"] > 0 and r["n_prompt"] == 0), 0.0)
    cpp, ctg = ch["prefill_tok_s"], ch["decode_tok_s"]
    r = lambda a, b: f"{a / b:.2f}x" if b else "-"
    print(f"| {name} | {ch['model_bytes'] / 2**20:.1f} | {lpp:.2f} | {cpp:.2f} | {r(cpp, lpp)} | {ltg:.2f} | {ctg:.2f} | {r(ctg, ltg)} | {ch['decode_gbs']:.2f} | {ch['decode_bandwidth_pct']:.0f}% of {ch['bandwidth_gbs']:.1f} |")
PY
rm -rf "$TMP"

#!/usr/bin/env bash
# Side-by-side throughput of chimera and llama.cpp on the same GGUF files, in
# one run.
#   scripts/bench_vs_llamacpp.sh LLAMA_CPP_BIN_DIR [-p 512] [-n 128] [-r 3] [-t 2] [-k 1] MODEL.gguf...
# llama.cpp is built from source outside this repository (never committed).
# Each model is measured in K rounds; a round runs llama-bench and chimera
# bench back to back (which goes first alternates), so both see the same
# machine state within seconds. On a machine whose memory bandwidth drifts
# (shared hosts) use -k 5 or more: the table then gives the median tok/s of
# each tool and the median (min–max) of the per-round ratios, which is what a
# comparison near parity can rest on. Also printed: chimera's decode
# bandwidth and its % of the built-in probe (medians over rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_BIN="$1"; shift
P=512; N=128; R=3; T=2; K=1
while [[ $# -gt 0 && "$1" == -* ]]; do
  case "$1" in
    -p) P="$2"; shift 2;; -n) N="$2"; shift 2;; -r) R="$2"; shift 2;; -t) T="$2"; shift 2;; -k) K="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 1;;
  esac
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
run_llama() { "$LLAMA_BIN/llama-bench" -m "$1" -p "$P" -n "$N" -r "$R" -t "$T" -o json > "$2" 2>/dev/null; }
# CHIMERA_BENCH_ARGS: extra chimera bench flags, e.g. "--isa avx2" against an AVX2-only llama.cpp build.
run_chimera() {
  # shellcheck disable=SC2086
  build/chimera bench -m "$1" -p "$P" -n "$N" -r "$R" --threads "$T" ${CHIMERA_BENCH_ARGS:-} -o json > "$2" 2>/dev/null
}
for M in "$@"; do
  name=$(basename "$M")
  for ((k = 1; k <= K; k++)); do
    if ((k % 2)); then
      run_llama "$M" "$TMP/$name.$k.llama.json"; run_chimera "$M" "$TMP/$name.$k.chimera.json"
    else
      run_chimera "$M" "$TMP/$name.$k.chimera.json"; run_llama "$M" "$TMP/$name.$k.llama.json"
    fi
  done
done
python3 - "$TMP" "$P" "$N" "$K" "$@" <<'PY'
import json, os, statistics, sys
tmp, P, N, K, models = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
med = statistics.median
def ratio_cell(ch, ll):
    r = [c / l for c, l in zip(ch, ll) if l > 0 and c > 0]
    if not r: return "-"
    return f"{med(r):.2f}x" if K == 1 else f"{med(r):.2f}x ({min(r):.2f}–{max(r):.2f})"
head = "median of " if K > 1 else ""
print(f"{K} round(s) per model; {head}tok/s, ratio = chimera / llama.cpp" + (" per round (min–max)" if K > 1 else ""))
print()
print(f"| model | size MiB | llama.cpp pp{P} | chimera pp{P} | ratio | llama.cpp tg{N} | chimera tg{N} | ratio | chimera decode GB/s | % of probe bw |")
print("|---|---|---|---|---|---|---|---|---|---|")
for m in models:
    name = os.path.basename(m)
    lpp, ltg, cpp, ctg, gbs, pct, probe = [], [], [], [], [], [], []
    size = 0
    for k in range(1, K + 1):
        ll = json.load(open(f"{tmp}/{name}.{k}.llama.json"))
        ch = json.load(open(f"{tmp}/{name}.{k}.chimera.json"))
        lpp.append(next((r["avg_ts"] for r in ll if r["n_prompt"] > 0 and r["n_gen"] == 0), 0.0))
        ltg.append(next((r["avg_ts"] for r in ll if r["n_gen"] > 0 and r["n_prompt"] == 0), 0.0))
        cpp.append(ch["prefill_tok_s"]); ctg.append(ch["decode_tok_s"])
        gbs.append(ch["decode_gbs"]); pct.append(ch["decode_bandwidth_pct"]); probe.append(ch["bandwidth_gbs"])
        size = ch["model_bytes"]
    print(f"| {name} | {size / 2**20:.1f} | {med(lpp):.2f} | {med(cpp):.2f} | {ratio_cell(cpp, lpp)} | "
          f"{med(ltg):.2f} | {med(ctg):.2f} | {ratio_cell(ctg, ltg)} | {med(gbs):.2f} | "
          f"{med(pct):.0f}% of {med(probe):.1f} |")
PY

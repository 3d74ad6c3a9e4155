#!/usr/bin/env bash
# Masked-diffusion generation speed, chimera vs llama.cpp's llama-diffusion-cli,
# on the same GGUF (a LLaDA-shaped file, e.g. from
#   chimera synth --like llada-8b --type Q4_K_M --layers 4 -o llada-8b-4L-Q4_K_M.gguf)
# with matched settings: prompt length, generation length, steps per block,
# block length, greedy low-confidence remasking (llama.cpp algorithm 4), threads.
#
#   scripts/bench_diffusion_vs_llamacpp.sh [-m MODEL] [-L LLAMA_BIN_DIR] [-c CHIMERA]
#       [-p PROMPT_TOKENS=64] [-n GEN=32] [-b BLOCK=32] [-s STEPS=8] [-t THREADS=2]
#       [-r REPS=1] [--tau 0.9] [--modes exact,prefix,dual+threshold]
#
# Prints tokens/s (generated tokens / generation wall time) for llama.cpp and
# for each chimera mode, and the ratio chimera / llama.cpp. llama.cpp has no
# caches or parallel decoding, so every chimera mode is compared with its one
# exact run.
#
# Matching llama-diffusion-cli (examples/diffusion at 3f545bec):
# * Its canvas is the whole micro-batch (-ub = prompt + generation) and its
#   blocks start at the prompt end but are counted over the whole canvas:
#   (P + N) must be a multiple of the block length, it makes (P + N) / B
#   blocks of which the last P / B are empty (each still costs one forward
#   pass before it notices), and its --diffusion-steps are over all of them.
#   We pass steps_per_block x (P + N) / B so the real blocks get the same steps
#   per block as chimera, and report the wasted passes.
# * It always applies a chat template (chatml for a file without one) and adds
#   BOS, so the prompt is a chatml-wrapped text sized with llama-tokenize to
#   exactly P tokens; chimera bench uses P random ids (the same amount of work).
# * It computes logits for every canvas row each step; chimera only for the
#   block's rows. That is part of what is compared.
set -euo pipefail
cd "$(dirname "$0")/.."
M=/work/bench-models/llada-8b-4L-Q4_K_M.gguf
LLAMA=/work/llama.cpp/build/bin
CHIMERA=build/chimera
P=64; N=32; B=32; S=8; T=2; R=1; TAU=0.9; MODES=exact,prefix,dual+threshold
while [[ $# -gt 0 ]]; do
  case "$1" in
    -m) M="$2"; shift 2;; -L) LLAMA="$2"; shift 2;; -c) CHIMERA="$2"; shift 2;;
    -p) P="$2"; shift 2;; -n) N="$2"; shift 2;; -b) B="$2"; shift 2;; -s) S="$2"; shift 2;;
    -t) T="$2"; shift 2;; -r) R="$2"; shift 2;; --tau) TAU="$2"; shift 2;; --modes) MODES="$2"; shift 2;;
    *) echo "unknown option $1" >&2; exit 1;;
  esac
done
(( N % B == 0 )) || { echo "error: -b $B must divide -n $N" >&2; exit 1; }
(( (P + N) % B == 0 )) || { echo "error: llama-diffusion-cli needs (P + N) % B == 0 (P=$P N=$N B=$B)" >&2; exit 1; }
NB=$(( N / B ))
(( S % NB == 0 )) || { echo "error: -s $S must be a multiple of the number of blocks $NB" >&2; exit 1; }
SPB=$(( S / NB )); UB=$(( P + N )); LB=$(( UB / B )); LSTEPS=$(( SPB * LB )); WASTED=$(( LB - NB ))

# A chatml-wrapped prompt of exactly P tokens (llama-diffusion-cli's formatting).
wrap() { printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$1"; }
count() { "$LLAMA/llama-tokenize" -m "$M" -p "$(wrap "$1")" --ids --log-disable 2>/dev/null | tail -1 | tr -cd ',' | wc -c; }
X=a; n=$(( $(count "$X") + 1 ))
(( n <= P )) || { echo "error: -p $P is below the chat-template overhead ($n tokens)" >&2; exit 1; }
while (( n < P )); do X="${X}a"; n=$(( $(count "$X") + 1 )); done
(( n == P )) || { echo "error: cannot size the prompt to $P tokens (got $n)" >&2; exit 1; }

TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo "model $(basename "$M"), prompt $P, gen $N, block $B, steps $S ($SPB per block), threads $T, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
LT=()
for ((r = 0; r < R; ++r)); do
  "$LLAMA/llama-diffusion-cli" -m "$M" -p "$X" -t "$T" -ub "$UB" -b "$UB" -c "$UB" --no-mmap --temp 0 --seed 1 \
      --diffusion-steps "$LSTEPS" --diffusion-block-length "$B" --diffusion-algorithm 4 > "$TMP/llama.log" 2>&1
  LT+=("$(sed -n 's/.*total time: \([0-9.]*\)ms.*/\1/p' "$TMP/llama.log")")
done
"$CHIMERA" bench -m "$M" -p "$P" -n "$N" --steps "$S" --block-length "$B" --remasking low_confidence \
    --threshold "$TAU" --diffusion-modes "$MODES" -r "$R" --threads "$T" -o json > "$TMP/chimera.json" 2>/dev/null

python3 - "$TMP/chimera.json" "$N" "$S" "$WASTED" "${LT[@]}" <<'PY'
import json, statistics, sys
rows = json.load(open(sys.argv[1]))
rows = rows if isinstance(rows, list) else [rows]
n, steps, wasted = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
passes = steps + wasted  # llama.cpp: the real steps + one pass per empty block
lms = [float(x) for x in sys.argv[5:] if x]
if not lms:
    sys.exit("error: no 'total time' in llama-diffusion-cli's output")
lsec = statistics.mean(lms) / 1e3
ltok = n / lsec
print(f"llama.cpp: {lsec:.2f} s, {ltok:.3f} tok/s, {passes} forward passes "
      f"({steps} steps + {wasted} on empty blocks), {lsec / passes * 1e3:.0f} ms/pass")
print()
print("| mode | chimera tok/s | chimera steps | rows/step | ms/step | llama.cpp tok/s | ratio |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    mode = r["mode"] + (f" τ={r['threshold']:g}" if r["threshold"] > 0 else "")
    print(f"| {mode} | {r['gen_tok_s']:.3f} | {r['steps']:.0f} | {r['rows_per_step']:.0f} | {r['ms_per_step']:.0f} "
          f"| {ltok:.3f} | {r['gen_tok_s'] / ltok:.2f}x |")
PY

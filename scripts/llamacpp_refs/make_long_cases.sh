#!/usr/bin/env bash
# Regenerates tests/data/golden_long/ with the long_case tool (see README.md here).
# usage: scripts/llamacpp_refs/make_long_cases.sh /path/to/long_case [SHARED_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
TOOL="$1"
SHARED="${2:-${CHIMERA_SHARED:-../shared}}"
OUT=tests/data/golden_long
N_PROMPT=320
N_GEN=24
# name  model (relative to the shared folder)  tolerance (as the short case of that model)
while read -r name model tol; do
  cmd="long_case \$SHARED/$model $model $OUT/prompt.txt $N_PROMPT $N_GEN $tol $OUT/$name"
  "$TOOL" "$SHARED/$model" "$model" "$OUT/prompt.txt" "$N_PROMPT" "$N_GEN" "$tol" "$OUT/$name" "$cmd"
done <<'CASES'
tiny-llama-300 golden/models/tiny-llama.gguf 0.005
tiny-mamba2-300 golden/models/tiny-mamba2.gguf 0.005
tiny-granitehybrid-300 golden/models/tiny-granitehybrid.gguf 0.005
CASES

#!/usr/bin/env bash
# Exits 1 with a clear message unless the shared reference data is there:
# $CHIMERA_SHARED (default ../shared next to the checkout) must hold golden/
# with its README.md and case files. CI runs this first, so a checkout without
# the reference data fails instead of reporting a suite of skipped tests as green.
set -euo pipefail
dir="${CHIMERA_SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared}"
golden="$dir/golden"
if [[ ! -d "$golden" ]]; then
  echo "error: shared reference data not found: $golden is not a directory" >&2
  echo "error: set CHIMERA_SHARED to the shared folder (or place it at ../shared); CI does not run without it" >&2
  exit 1
fi
if [[ ! -f "$golden/README.md" ]] || ! compgen -G "$golden/*.json" >/dev/null; then
  echo "error: shared reference data incomplete: $golden has no README.md or no golden cases (*.json)" >&2
  exit 1
fi

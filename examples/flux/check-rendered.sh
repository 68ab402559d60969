#!/bin/sh
# CI check for the rendered-manifests pattern: every wmrender.yaml under the repository must have its committed
# render beside it (rendered/) exactly as wmrender would write it now. Exit 1 with a unified diff when stale.
# Usage: check-rendered.sh [REPOSITORY_ROOT]     (needs wmrender on PATH)
set -eu
root=${1:-.}
status=0
found=0
for inputs in $(find "$root" -name wmrender.yaml -not -path '*/.git/*' | sort); do
  found=1
  dir=$(dirname "$inputs")
  if wmrender render -f "$inputs" -o "$dir/rendered" --check; then
    echo "ok: $dir/rendered is current"
  else
    code=$?
    [ "$code" -eq 1 ] || exit "$code"      # 2 = invalid inputs, 3 = I/O: fail with wmrender's own code
    echo "STALE: $dir/rendered; run: wmrender render -f $inputs -o $dir/rendered" >&2
    status=1
  fi
done
[ "$found" -eq 1 ] || { echo "no wmrender.yaml found under $root" >&2; exit 2; }
exit "$status"

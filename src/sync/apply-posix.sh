# wmrender's apply step for the posix profile ($1 = root standing for C:\, $2 = changed node paths joined by |).
# Verifies every file of the node manifest against its sha256 and prints install.ps1's JSON result line.
root=$1
manifest="$root/C/k/wmrender/manifest.json"
errors=""
checked=0
if [ ! -f "$manifest" ]; then
  printf '{"created":[],"updated":[],"restarted":[],"started":[],"rebootRequired":false,"missing":[],"errors":["no manifest"]}\n'
  exit 1
fi
# The manifest is wmrender's own pretty JSON: one "path" line, then its "sha256" line.
paths=$(sed -n 's/^ *"path": "\(.*\)",$/\1/p' "$manifest")
sums=$(sed -n 's/^ *"sha256": "\([0-9a-f]*\)",$/\1/p' "$manifest")
set -- $sums
for p in $paths; do
  want=$1; shift
  rel=$(printf '%s' "$p" | sed -e 's/^C:\\\\/C\//' -e 's/\\\\/\//g')
  file="$root/$rel"
  have=$(sha256sum "$file" 2>/dev/null | cut -d' ' -f1)
  if [ "$have" != "$want" ]; then
    errors="$errors\"mismatch: $p\","
  fi
  checked=$((checked + 1))
done
errors=${errors%,}
if [ -n "$errors" ]; then
  printf '{"created":[],"updated":[],"restarted":[],"started":[],"rebootRequired":false,"missing":[],"errors":[%s],"checked":%d}\n' "$errors" "$checked"
  exit 1
fi
printf '{"created":[],"updated":[],"restarted":[],"started":[],"rebootRequired":false,"missing":[],"errors":[],"checked":%d}\n' "$checked"

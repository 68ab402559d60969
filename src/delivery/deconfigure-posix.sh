# wmrender's deconfigure step for the posix profile ($1 = the folder standing for C:\), standing in for
# `wmrender-node deconfigure`: removes every file the node manifest lists, then the manifest, and prints the agent's
# JSON result line (exit 0 done, 1 failed). A file that cannot be removed fails the step and keeps the manifest, so
# running it again finishes the job. Paths are read one per line, never split.
root=$1
manifest="$root/C/k/wmrender/manifest.json"
result() { # $1 status, $2 errors (JSON strings, comma-separated)
  printf '{"status":"%s","created":[],"updated":[],"deleted":[],"started":[],"restarted":[],"rebootRequired":false,"pending":[],"missing":[],"errors":[%s]}\n' "$1" "$2"
}
if [ ! -f "$manifest" ]; then
  result converged ""
  exit 0
fi
# A one-file change's update (see the apply step) names files too, when it was written over this very manifest.
update="$manifest.wmrender-update"
paths() {
  if update_applies; then
    sed -n -e 's/^ *"path": "\(.*\)",$/\1/p' "$update"
  fi
  sed -n -e 's/^ *"path": "\(.*\)",$/\1/p' "$manifest"
}
paths | {
  errors=""
  while IFS= read -r path; do
    rel=$(printf '%s\n' "$path" | sed -e 's/^C:\\\\//' -e 's/\\\\/\//g')
    file="$root/C/$rel"
    if [ -e "$file" ] || [ -L "$file" ]; then
      rm -f "$file" 2>/dev/null || errors="$errors\"cannot remove $path\","
    fi
  done
  errors=${errors%,}
  if [ -n "$errors" ]; then
    result failed "$errors"
    exit 1
  fi
  rm -f "$manifest" "$update"
  result converged ""
}

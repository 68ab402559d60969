# wmrender's apply step for the posix profile ($1 = the folder standing for C:\). Checks that every file of the
# node manifest is there with its size (sync hashed the bytes as they left; SSH carries them intact) and prints
# the agent's JSON result line. Paths are read one per line, never split.
root=$1
manifest="$root/C/k/wmrender/manifest.json"
# A host that stands in for a node needing a reboot (as Windows' pending-reboot flag would say) has a
# $root/reboot-pending file; whatever plays the node removes it when it "reboots" (see the profile's reboot command).
reboot=false
if [ -f "$root/reboot-pending" ]; then reboot=true; fi
# Its boot: $root/boot-id, which the same player changes at each "reboot" (letters, digits and dashes kept).
boot=$(tr -cd 'a-zA-Z0-9-' < "$root/boot-id" 2>/dev/null)
result() { # $1 status, $2 errors (JSON strings, comma-separated), $3 files checked
  printf '{"status":"%s","created":[],"updated":[],"deleted":[],"started":[],"restarted":[],"rebootRequired":%s,"bootId":"%s","pending":[],"missing":[],"errors":[%s],"checked":%d}\n' "$1" "$reboot" "$boot" "$2" "$3"
}
if [ ! -f "$manifest" ]; then
  result failed '"no manifest"' 0
  exit 1
fi
# A one-file change's update (manifest.json.wmrender-update: the entries that changed since, written over exactly
# this manifest, which then holds no journal) is read first: its entries stand for the manifest's of the same path.
update="$manifest.wmrender-update"
entries() {
  if update_applies; then
    sed -n -e 's/^ *"path": "\(.*\)",$/P\1/p' -e 's/^ *"size": \([0-9]*\),$/S\1/p' "$update"
  fi
  sed -n -e 's/^ *"path": "\(.*\)",$/P\1/p' -e 's/^ *"size": \([0-9]*\),$/S\1/p' "$manifest"
}
# The manifest is wmrender's own pretty JSON: a "path" line, then its "size" line. Paths stay JSON-escaped (a
# backslash is written \\) so they can go back into the result line as they are.
entries | {
  errors=""
  checked=0
  path=""
  seen="
"
  while IFS= read -r line; do
    case $line in
      P*) path=${line#P} ;;
      S*)
        case $seen in *"
$path
"*) continue ;; esac
        seen="$seen$path
"
        rel=$(printf '%s\n' "$path" | sed -e 's/^C:\\\\//' -e 's/\\\\/\//g')
        file="$root/C/$rel"
        if [ ! -f "$file" ]; then
          errors="$errors\"missing: $path\","
        elif [ "$(wc -c < "$file" | tr -d ' ')" != "${line#S}" ]; then
          errors="$errors\"size differs: $path\","
        fi
        checked=$((checked + 1))
        ;;
    esac
  done
  errors=${errors%,}
  if [ -n "$errors" ]; then
    result failed "$errors" "$checked"
    exit 1
  fi
  result converged "" "$checked"
}

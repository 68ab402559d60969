# Shared by the posix apply and deconfigure steps (put before each; $manifest is their node manifest): whether the
# manifest's update (manifest.json.wmrender-update, written by a one-file sync) counts, which it does only over exactly
# the manifest it names by sha256, holding no journal.
update_applies() {
  [ -f "$manifest.wmrender-update" ] && ! grep -q '^  "pending": ' "$manifest" &&
    [ "$(sed -n 's/^  "base": "sha256:\([0-9a-f]*\)",$/\1/p' "$manifest.wmrender-update")" = \
      "$(sha256sum < "$manifest" | cut -d ' ' -f 1)" ]
}

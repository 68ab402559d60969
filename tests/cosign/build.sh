#!/usr/bin/env bash
# Builds the real cosign for the signing tests (tests/publish.rs, tests/pull.rs) from its Go module at the version
# go.mod pins (github.com/sigstore/cosign/v2 v2.6.5, the last release line that stores signatures under the
# `sha256-<hex>.sig` tag by default), stamped as cosign's release Makefile stamps it
# (sigs.k8s.io/release-utils/version.gitVersion), into target/cosign of this checkout (or $COSIGN_DIR); and beside it
# two small test servers: `oci-registry` (oci-registry/main.go: go-containerregistry's registry, which has the OCI 1.1
# referrers API that Debian's docker-registry lacks) and `token-server` (token-server/main.go: the realm of a
# registry with token authentication). Does nothing when all three are there for this go.mod, go.sum and these
# sources. Needs Go (see go.mod) and the Go module proxy.
#
# The first build took 3 min 46 s on a 2-core machine busy with another job, the modules downloaded on the way
# (179 CPU-seconds); with Go's module and build caches kept (~/go/pkg/mod, ~/.cache/go-build) it links again in
# seconds, and when it is current nothing runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${COSIGN_DIR:-$root/target/cosign}

if ! command -v go >/dev/null 2>&1; then
  echo "cosign/build.sh: Go is needed to build cosign for the signing tests ($(sed -n 's/^go //p' "$here/go.mod") or newer)" >&2
  exit 1
fi
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" "$here/oci-registry/main.go" "$here/token-server/main.go" | sha256sum | cut -c1-16)
if [ -x "$out/cosign" ] && [ -x "$out/oci-registry" ] && [ -x "$out/token-server" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
version=$(sed -n 's|^\tgithub.com/sigstore/cosign/v2 \(v[^ ]*\).*|\1|p' "$here/go.mod")
mkdir -p "$out"
cd "$here"
start=$(date +%s)
go build -trimpath -ldflags "-X sigs.k8s.io/release-utils/version.gitVersion=$version" -o "$out/" \
  github.com/sigstore/cosign/v2/cmd/cosign
go build -trimpath -o "$out/" ./oci-registry ./token-server
echo "$stamp" > "$out/.stamp"
echo "cosign/build.sh: cosign $version in $out ($(( $(date +%s) - start )) s)" >&2

#!/usr/bin/env bash
# Builds Prometheus 3.5.0 from its Go module (go.mod beside this file) into target/monitoring-k8s of this checkout, for
# tests/monitoring_prometheus.rs (tests/monitoring/setup.sh runs it). Debian's prometheus package (../setup.sh) is
# built without Kubernetes service discovery; this one is upstream's, with it. Does nothing when the binary is there
# for this go.mod, go.sum and script. Needs Go and the Go module proxy.
#
# A first build took 2 min 40 s on a 2-core machine (and 15 s more to download the modules); with Go's module and
# build caches kept, about a second.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$root/target/monitoring-k8s

if ! command -v go >/dev/null 2>&1; then
  echo "monitoring/prometheus/build.sh: Go is needed to build Prometheus with Kubernetes service discovery" >&2
  exit 1
fi
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)
if [ -x "$out/prometheus" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
mkdir -p "$out"
cd "$here"
start=$(date +%s)
# The version Prometheus reports (`--version`, prometheus_build_info), as its release build stamps it (the module's tag
# in place of the commit).
v=github.com/prometheus/common/version
go build -trimpath -o "$out/" \
  -ldflags "-X $v.Version=3.5.0 -X $v.Revision=v0.305.0 -X $v.Branch=HEAD -X $v.BuildUser=wmrender-tests" \
  github.com/prometheus/prometheus/cmd/prometheus
echo "$stamp" > "$out/.stamp"
echo "monitoring/prometheus/build.sh: Prometheus with Kubernetes service discovery in $out ($(( $(date +%s) - start )) s)" >&2

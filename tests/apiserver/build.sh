#!/usr/bin/env bash
# Builds the cluster tests' control plane from source, at the versions go.mod pins: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl (from the Go module k8s.io/kubernetes; kubectl is how the tests
# apply rendered objects as a user does) and etcd (go.etcd.io/etcd/server). Writes them where controller-runtime's envtest looks
# for its binaries, $KUBEBUILDER_ASSETS (default: target/kube-assets of this checkout), and does nothing when they
# are already there for this go.mod, go.sum and etcd/main.go. Needs Go (see go.mod) and the Go module proxy.
#
# The first build took 4 min 51 s on a busy 2-core machine with empty Go caches (325 CPU-seconds, the modules
# downloaded); with Go's module and build caches kept (~/go/pkg/mod, ~/.cache/go-build) linking them again takes
# about 8 s, and a pin change recompiles only what changed. Adding kube-controller-manager to a warm cache took 51 s
# (its controllers; the client and API packages it shares with kube-apiserver were built).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
assets=${KUBEBUILDER_ASSETS:-$root/target/kube-assets}

if ! command -v go >/dev/null 2>&1; then
  echo "apiserver/build.sh: Go is needed to build kube-apiserver and etcd for the cluster tests ($(sed -n 's/^go //p' "$here/go.mod") or newer)" >&2
  exit 1
fi
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/etcd/main.go" | sha256sum | cut -c1-16)
if [ -x "$assets/kube-apiserver" ] && [ -x "$assets/kube-controller-manager" ] && [ -x "$assets/kube-scheduler" ] \
  && [ -x "$assets/kubectl" ] && [ -x "$assets/etcd" ] && [ "$(cat "$assets/.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
mkdir -p "$assets"
cd "$here"
start=$(date +%s)
# -trimpath: the same binary whatever the checkout's path. GOFLAGS from the caller (e.g. -mod=mod) are kept.
go build -trimpath -o "$assets/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl ./etcd
echo "$stamp" > "$assets/.stamp"
echo "apiserver/build.sh: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd in $assets ($(( $(date +%s) - start )) s)" >&2

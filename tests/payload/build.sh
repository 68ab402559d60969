#!/usr/bin/env bash
# Builds the real Windows programs of the WMCO payload tests from their Go modules (go.mod beside this file), for
# windows/amd64 (CGO_ENABLED=0), into target/payload-programs of this checkout (or $PAYLOAD_PROGRAMS):
#   kubelet.exe, kube-proxy.exe   k8s.io/kubernetes v1.36.3 (cmd/kubelet, cmd/kube-proxy)
#   kube-log-runner.exe           k8s.io/component-base v0.36.3 (logs/kube-log-runner)
#   win-bridge.exe, win-overlay.exe, host-local.exe
#                                 github.com/containernetworking/plugins v1.9.1 (plugins/main/windows/*, plugins/ipam)
#   containerd.exe, ctr.exe       github.com/containerd/containerd v1.7.27 (cmd/containerd, cmd/ctr; WMCO's pin), from
#                                 the module of its own in containerd/ (its dependencies are older than Kubernetes')
#   cri-pull.exe                  containerd/cri-pull: the rig's CRI client (PullImage, as kubelet asks), on
#                                 containerd's own dialer, which gets past Wine's named pipes where kubelet's does not
#   windows_exporter.exe          github.com/prometheus-community/windows_exporter v0.27.2 (the release the module
#                                 proxy serves; WMCO builds its openshift fork), from its own module in
#                                 windows_exporter/
# and, for linux/amd64, linux/kubelet (the same kubelet), which tests/support/kubelet.rs runs where a node's join can
# be had for real (about 3.5 minutes the first time on a 2-core machine, its Linux packages not yet in Go's cache).
# wmco-image.sh lays them out as WMCO's /payload (all but containerd, ctr and windows_exporter, which
# tests/wine_programs.rs runs under Wine; the image has a stand-in for windows_exporter). Everything else WMCO ships
# there (containerd's runhcs shim, hybrid-overlay-node, csi-proxy, WICD, the cloud providers' programs) is not built
# here: that script writes stand-in files for them. Does nothing when the programs are there for this go.mod, go.sum and script. Needs Go
# (see go.mod) and the Go module proxy.
#
# Versions are stamped as the projects' release builds stamp them: Kubernetes' hack/lib/version.sh sets gitVersion,
# gitMajor, gitMinor and buildDate in both k8s.io/component-base/version and k8s.io/client-go/pkg/version (buildDate
# here is the tag's time, as with SOURCE_DATE_EPOCH; gitCommit and gitTreeState are left unset, as that script does
# when it knows no commit: a Go module carries none); the CNI plugins' release script sets
# pkg/utils/buildversion.BuildVersion to the tag; containerd's Makefile sets version.Version and version.Package (the
# revision, which a Go module does not carry, is left empty).
#
# The first build took 5 min 5 s on a 2-core machine busy with another job (340 CPU-seconds, 1.8 GB peak memory; the
# modules were already downloaded, Go's build cache held nothing for windows/amd64); with Go's module and build caches
# kept (~/go/pkg/mod, ~/.cache/go-build) building them again takes about 1 s, and when they are current nothing runs.
# containerd and ctr add about a minute the first time (58 s, 85 CPU-seconds, with the shared modules downloaded);
# windows_exporter 19 s (its modules downloaded). Its version is stamped as its promu build stamps it
# (github.com/prometheus/common/version: Version, Branch, BuildDate).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${PAYLOAD_PROGRAMS:-$root/target/payload-programs}
programs=(kubelet kube-proxy kube-log-runner win-bridge win-overlay host-local containerd ctr cri-pull windows_exporter)

if ! command -v go >/dev/null 2>&1; then
  echo "payload/build.sh: Go is needed to build kubelet, kube-proxy, kube-log-runner and the CNI plugins for Windows ($(sed -n 's/^go //p' "$here/go.mod") or newer)" >&2
  exit 1
fi
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/containerd/go.mod" "$here/containerd/go.sum" "$here/containerd/cri-pull/main.go" \
  "$here/windows_exporter/go.mod" "$here/windows_exporter/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)
current=yes
for p in "${programs[@]}"; do [ -f "$out/$p.exe" ] || current=; done
[ -f "$out/linux/kubelet" ] || current=
if [ -n "$current" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
mkdir -p "$out"
rm -f "$out/.stamp"
cd "$here"
start=$(date +%s)
export GOOS=windows GOARCH=amd64 CGO_ENABLED=0

# The pinned versions and tag times, read from go.mod (and the module cache) so the stamps follow a pin change.
read -r kube kube_date < <(go list -m -f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
cni=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)
major=${kube#v}; major=${major%%.*}
minor=${kube#v*.}; minor=${minor%%.*}
kflags=
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kflags+=" -X $pkg.gitVersion=$kube -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.buildDate=$kube_date"
done

# -trimpath: the same binaries whatever the checkout's path. GOFLAGS from the caller (e.g. -mod=mod) are kept.
go build -trimpath -o "$out/" -ldflags "${kflags# }" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/component-base/logs/kube-log-runner
p=github.com/containernetworking/plugins
go build -trimpath -o "$out/" -ldflags "-X $p/pkg/utils/buildversion.BuildVersion=$cni" \
  $p/plugins/main/windows/win-bridge $p/plugins/main/windows/win-overlay $p/plugins/ipam/host-local
c=github.com/containerd/containerd
cversion=$(cd containerd && go list -m -f '{{.Version}}' $c)
(cd containerd && go build -trimpath -o "$out/" -ldflags "-X $c/version.Version=$cversion -X $c/version.Package=$c" \
  $c/cmd/containerd $c/cmd/ctr && go build -trimpath -o "$out/" ./cri-pull)
w=github.com/prometheus-community/windows_exporter
read -r wversion wdate < <(cd windows_exporter && go list -m -f '{{.Version}} {{.Time.UTC.Format "20060102-15:04:05"}}' $w)
v=github.com/prometheus/common/version
(cd windows_exporter && go build -trimpath -o "$out/" \
  -ldflags "-X $v.Version=${wversion#v} -X $v.Branch=HEAD -X $v.BuildDate=$wdate" $w)
GOOS=linux go build -trimpath -o "$out/linux/" -ldflags "${kflags# }" k8s.io/kubernetes/cmd/kubelet
for p in "${programs[@]}"; do
  [ -f "$out/$p.exe" ] || { echo "payload/build.sh: go build made no $out/$p.exe" >&2; exit 1; }
done
[ -f "$out/linux/kubelet" ] || { echo "payload/build.sh: go build made no $out/linux/kubelet" >&2; exit 1; }
echo "$stamp" > "$out/.stamp"
echo "payload/build.sh: ${programs[*]/%/.exe} for windows/amd64 and kubelet for linux/amd64 in $out ($(( $(date +%s) - start )) s)" >&2

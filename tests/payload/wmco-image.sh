#!/usr/bin/env bash
# Makes an OCI image layout holding a Windows Machine Config Operator (WMCO) operator image's /payload, for tests of
# commands that pull the Windows node programs out of it. One layer, /payload only, laid out as WMCO's build/Dockerfile
# lays it out (plain files, v10.21.0):
#   /payload/kube-node/{kubelet.exe,kube-proxy.exe,kube-log-runner.exe}
#   /payload/cni/{host-local.exe,win-bridge.exe,win-overlay.exe}
#   /payload/containerd/{containerd.exe,containerd-shim-runhcs-v1.exe,containerd_conf.toml}
#   /payload/hybrid-overlay-node.exe
#   /payload/windows-exporter/{windows_exporter.exe,windows-exporter-webconfig.yaml}
#   /payload/csi-proxy/csi-proxy.exe
#   /payload/powershell/{hns.psm1,gcp-get-hostname.ps1,windows-defender-exclusion.ps1}
#   /payload/windows-instance-config-daemon.exe, /payload/azure-cloud-node-manager.exe,
#   /payload/ecr-credential-provider.exe, /payload/generated/ (empty, mode 0777 as WMCO makes it)
# kubelet, kube-proxy, kube-log-runner and the three CNI plugins are the real Windows programs tests/payload/build.sh
# builds (this script runs it; it does nothing when they are current). Everything else is a small STAND-IN file, not
# the real thing: its content is one line "stand-in for <name>, not built by tests/payload/build.sh" (after "# " in the
# .toml, .yaml, .ps1 and .psm1 files, so they still parse as empty documents of their kind).
#
# With --compressed it is laid out as WMCO v10.21.1 and later do: each file is stored as <name>.tar.gz in the same
# directory (`tar -cf - <name> | gzip -9 -n`, run in that directory, so the archive holds the bare name) and
# /payload/sha256sum has one `sha256sum` line per uncompressed file, naming it by the path WMCO's build stage has it
# at (/build/windows-machine-config-operator/..., as in WMCO's build/Dockerfile), not by its /payload path; every line
# ends in the file's /payload name (ecr-credential-provider included, which the build stage has without ".exe").
#
# Usage: tests/payload/wmco-image.sh OUT_LAYOUT TAG [--compressed]
#   OUT_LAYOUT is created (umoci init) unless it is already an OCI image layout; TAG is replaced if it exists.
# File, directory, layer and config times are fixed (the epoch), so the layout is as reproducible as umoci 0.4 allows.
# Needs umoci, tar, gzip, sha256sum (and, through build.sh, Go). Prints nothing but errors; exits non-zero on failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
programs=${PAYLOAD_PROGRAMS:-$root/target/payload-programs}

usage() { echo "usage: tests/payload/wmco-image.sh OUT_LAYOUT TAG [--compressed]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
out=$1 tag=$2 compressed=
if [ $# -eq 3 ]; then [ "$3" = --compressed ] || usage; compressed=yes; fi
[ -n "$out" ] && [ -n "$tag" ] || usage
for tool in umoci tar gzip sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "payload/wmco-image.sh: $tool is needed" >&2; exit 1; }
done

W=$(mktemp -d "${TMPDIR:-/tmp}/wmco-image.XXXXXX")
trap 'chmod -R u+w "$W" 2>/dev/null || true; rm -rf "$W"' EXIT
quiet() { # run a command, showing its output only when it fails
  "$@" >"$W/log" 2>&1 || { local rc=$?; echo "payload/wmco-image.sh: failed ($rc): $*" >&2; cat "$W/log" >&2; return "$rc"; }
}

# The real programs (build.sh's own "built in N s" line is not an error, so only a failure is shown).
quiet bash "$here/build.sh"

# --- the payload tree -----------------------------------------------------------------------------------------------
umask 022
P=$W/payload
B=/build/windows-machine-config-operator
# /payload path | where WMCO's build stage has the file | source here ("" = a stand-in)
entries=(
  "kube-node/kubelet.exe|$B/kubelet/_output/local/bin/windows/amd64/kubelet.exe|$programs/kubelet.exe"
  "kube-node/kube-proxy.exe|$B/kube-proxy/_output/local/bin/windows/amd64/kube-proxy.exe|$programs/kube-proxy.exe"
  "kube-node/kube-log-runner.exe|$B/kubelet/_output/local/bin/windows/amd64/kube-log-runner.exe|$programs/kube-log-runner.exe"
  "cni/host-local.exe|$B/containernetworking-plugins/bin/host-local.exe|$programs/host-local.exe"
  "cni/win-bridge.exe|$B/containernetworking-plugins/bin/win-bridge.exe|$programs/win-bridge.exe"
  "cni/win-overlay.exe|$B/containernetworking-plugins/bin/win-overlay.exe|$programs/win-overlay.exe"
  "containerd/containerd.exe|$B/containerd/bin/containerd.exe|"
  "containerd/containerd-shim-runhcs-v1.exe|$B/hcsshim/containerd-shim-runhcs-v1.exe|"
  "containerd/containerd_conf.toml|$B/pkg/internal/containerd_conf.toml|"
  "hybrid-overlay-node.exe|$B/ovn-kubernetes/go-controller/_output/go/bin/windows/hybrid-overlay-node.exe|"
  "windows-exporter/windows_exporter.exe|$B/windows_exporter/windows_exporter.exe|"
  "windows-exporter/windows-exporter-webconfig.yaml|$B/pkg/internal/windows-exporter-webconfig.yaml|"
  "csi-proxy/csi-proxy.exe|$B/csi-proxy/bin/csi-proxy.exe|"
  "powershell/hns.psm1|$B/pkg/internal/hns.psm1|"
  "powershell/gcp-get-hostname.ps1|$B/pkg/internal/gcp-get-hostname.ps1|"
  "powershell/windows-defender-exclusion.ps1|$B/pkg/internal/windows-defender-exclusion.ps1|"
  "windows-instance-config-daemon.exe|$B/build/_output/bin/windows-instance-config-daemon.exe|"
  "azure-cloud-node-manager.exe|$B/cloud-provider-azure/azure-cloud-node-manager.exe|"
  "ecr-credential-provider.exe|$B/cloud-provider-aws/ecr-credential-provider.exe|"
)
mkdir -p "$P/generated"
chmod 0777 "$P/generated"
: > "$W/sums"
for e in "${entries[@]}"; do
  IFS='|' read -r rel build src <<<"$e"
  name=${rel##*/} dir=$P
  [ "$rel" = "$name" ] || dir=$P/${rel%/*}
  mkdir -p "$dir"
  if [ -n "$src" ]; then
    cp "$src" "$dir/$name"
  else
    case $name in *.exe) c= ;; *) c='# ' ;; esac
    printf '%sstand-in for %s, not built by tests/payload/build.sh\n' "$c" "$name" > "$dir/$name"
  fi
  case $name in *.exe) chmod 0755 "$dir/$name" ;; *) chmod 0644 "$dir/$name" ;; esac
  touch -d @0 "$dir/$name"
  if [ -n "$compressed" ]; then
    printf '%s  %s\n' "$(sha256sum < "$dir/$name" | cut -d' ' -f1)" "$build" >> "$W/sums"
    (cd "$dir" && tar --owner=0 --group=0 --numeric-owner -cf - "$name" | gzip -9 -n > "$name.tar.gz")
    rm "$dir/$name"
    chmod 0644 "$dir/$name.tar.gz"
    touch -d @0 "$dir/$name.tar.gz"
  fi
done
if [ -n "$compressed" ]; then
  install -m 0644 "$W/sums" "$P/sha256sum"
  touch -d @0 "$P/sha256sum"
fi
find "$P" -depth -type d -exec touch -d @0 {} +

# --- the image ------------------------------------------------------------------------------------------------------
if [ ! -f "$out/index.json" ]; then
  [ ! -e "$out" ] || [ -z "$(ls -A "$out")" ] || { echo "payload/wmco-image.sh: $out exists and is not an OCI image layout" >&2; exit 1; }
  quiet umoci init --layout "$out"
fi
if umoci ls --layout "$out" 2>/dev/null | grep -qxF -- "$tag"; then
  quiet umoci rm --image "$out:$tag"
fi
epoch=1970-01-01T00:00:00Z
quiet umoci new --image "$out:$tag"
quiet umoci config --image "$out:$tag" --no-history --created "$epoch" --os linux --architecture amd64
quiet umoci unpack --rootless --image "$out:$tag" "$W/bundle"
mv "$P" "$W/bundle/rootfs/payload"
touch -d @0 "$W/bundle/rootfs"
quiet umoci repack --image "$out:$tag" --history.created "$epoch" \
  --history.created_by "tests/payload/wmco-image.sh${compressed:+ --compressed}" "$W/bundle"
quiet umoci gc --layout "$out"

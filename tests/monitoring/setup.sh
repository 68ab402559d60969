#!/usr/bin/env bash
# The real consumers of what wmrender renders for monitoring and log rotation, at pinned versions, in target/monitoring
# of this checkout (tests/monitoring.rs and tests/monitoring_prometheus.rs find them there):
#
# - Prometheus and promtool: Debian bookworm's `prometheus` package, unpacked (not installed: no service starts);
# - the prometheus-operator CRDs (ServiceMonitor, PrometheusRule, …) from the Go module
#   github.com/prometheus-operator/prometheus-operator, whose example/prometheus-operator-crd package embeds them;
# - the APIServer CRD (config.openshift.io, the cluster's TLS security profile) from the Go module
#   github.com/openshift/api;
# - kube-log-runner, built from its Go module (k8s.io/component-base, at the version tests/apiserver/go.mod pins).
#
# Safe to run again: it does nothing when everything is there for these pins. Needs apt (Debian), Go and the Go
# module proxy.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/target/monitoring

PROMETHEUS_DEB=2.42.0+ds-5+deb12u1
PROMETHEUS_OPERATOR=v0.94.1
OPENSHIFT_API=v0.0.0-20260709102940-580f1c1ba691

stamp=$( (cat "$0" "$root/tests/apiserver/go.mod" "$root/tests/apiserver/go.sum") | sha256sum | cut -c1-16)
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
start=$(date +%s)
rm -rf "$out"
mkdir -p "$out/bin" "$out/crds"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Prometheus 2.42 (Debian's): the version matters less than that it is the real one, so when the archive has moved
# on from the pinned build, the one it has is taken.
fetch() { (cd "$work" && apt-get download -q "$@" >/dev/null 2>&1); }
if ! fetch "prometheus=$PROMETHEUS_DEB"; then
  apt-get update -q >/dev/null
  fetch "prometheus=$PROMETHEUS_DEB" || fetch prometheus || {
    echo "monitoring/setup.sh: apt-get download prometheus failed (Debian's archive is needed)" >&2
    exit 1
  }
fi
dpkg-deb -x "$work"/prometheus_*.deb "$work/deb"
cp "$work/deb/usr/bin/prometheus" "$work/deb/usr/bin/promtool" "$out/bin/"

module_dir() { GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'; }
operator=$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR")
cp "$operator"/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml \
   "$operator"/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml "$out/crds/"
api=$(module_dir "github.com/openshift/api@$OPENSHIFT_API")
cp "$api"/config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_apiservers-Default.crd.yaml "$out/crds/"
chmod u+w "$out"/crds/*

# kube-log-runner from the component-base module the test control plane's go.mod already pins (it rotates since
# Kubernetes 1.34).
(cd "$root/tests/apiserver" && go build -trimpath -o "$out/bin/" k8s.io/component-base/logs/kube-log-runner)

echo "$stamp" > "$out/.stamp"
echo "monitoring/setup.sh: Prometheus, promtool, kube-log-runner and the CRDs in $out ($(( $(date +%s) - start )) s)" >&2

#!/usr/bin/env bash
# Installs and builds everything `cargo test --locked` needs, on a fresh Debian machine of this project's kind
# (Rust through rustup, Go, root): the real parts the tests start and stop themselves.
#
# - OpenSSH (the sync tests' sshd on 127.0.0.1), containerd, a registry, skopeo, umoci and a CA (tests/e2e/mirrors.sh),
#   GNU time (the benchmarks' peak memory);
# - musl-tools, busybox-static and Rust's musl target (the images: image/build.sh, tests/images.rs);
# - Wine, MinGW-w64 and Rust's Windows target (the node agent under Wine: tests/e2e/wine-setup.sh);
# - kube-apiserver, kube-controller-manager, kube-scheduler and etcd, built from source at pinned releases
#   (tests/apiserver/build.sh; the cluster tests);
# - Prometheus and promtool (Debian's), kube-log-runner (built from its Go module), the prometheus-operator and
#   APIServer CRDs (tests/monitoring/setup.sh; the monitoring tests), and upstream's Prometheus 3.5 with Kubernetes
#   service discovery, built from its Go module (tests/monitoring/prometheus/build.sh; a first build takes about 3
#   minutes on 2 cores);
# - the real Windows programs of the payload and Wine tests (kubelet, kube-proxy, kube-log-runner, the CNI plugins,
#   containerd and ctr), and the Linux kubelet of the tests where a node joins for real, in a network namespace the
#   test makes (iproute2, nsenter) and runs pods with Debian's runc, CNI plugins and iptables, built from their Go modules (tests/payload/build.sh; about 9 minutes the first
#   time on 2 cores);
# - cosign, built from its Go module (tests/cosign/build.sh; the signing tests; about 4 minutes the first time), and
#   beside it go-containerregistry's registry (the OCI referrers API) and a token server (a registry's Bearer token
#   flow); seconds more.
#
# Safe to run again: it installs only what is missing, and rebuilds nothing that is current.
set -euo pipefail
cd "$(dirname "$0")/.."

# A first run builds about 10 GB under target/ (the test binaries, the Windows and static builds, the Go programs)
# and Go's caches take about 15 GB more; say so before a build runs out of disk half way.
free_gb=$(( $(df --output=avail -k . | tail -1) / 1024 / 1024 ))
if [ ! -d target/debug ] && [ "$free_gb" -lt 30 ]; then
  echo "setup.sh: warning: $free_gb GB free here; a first test run needs about 30 GB (target/ and Go's caches)" >&2
fi

need=()
for tool in containerd:containerd ctr:containerd docker-registry:docker-registry skopeo:skopeo umoci:umoci \
            openssl:openssl curl:curl ssh-keygen:openssh-client /usr/sbin/sshd:openssh-server \
            musl-gcc:musl-tools ip:iproute2 nsenter:util-linux runc:runc iptables:iptables \
            /usr/lib/cni/bridge:containernetworking-plugins; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
[ -x /usr/bin/time ] || need+=(time)
# The static one: an image has no C library for Debian's dynamic busybox to load.
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
# The images (image/build.sh, tests/images.rs): a static wmrender built for musl.
rustup target list --installed | grep -qx x86_64-unknown-linux-musl || rustup target add x86_64-unknown-linux-musl
bash tests/e2e/wine-setup.sh
bash tests/apiserver/build.sh
bash tests/monitoring/setup.sh
bash tests/monitoring/prometheus/build.sh
bash tests/payload/build.sh
bash tests/cosign/build.sh

#!/usr/bin/env bash
# The test command: installs and builds what the tests need (tests/setup.sh: OpenSSH, containerd and a registry,
# Wine and MinGW with Rust's Windows target, kube-apiserver and etcd from source), then runs the whole suite.
# Arguments go to `cargo test` (e.g. `bash tests/run.sh --test cluster_sync`). Needs root, Rust through rustup, Go.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/setup.sh
exec cargo test --locked "$@"

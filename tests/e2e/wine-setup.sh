#!/usr/bin/env bash
# Installs what the Wine tests (tests/wine_agent.rs, tests/wine_sync.rs) and benches/agent.py need on Debian:
# Wine 8 (64-bit; `wine` runs 64-bit programs), the MinGW-w64 toolchain that links Rust programs for Windows and
# builds the rig's ProcessPrng shim, and Rust's x86_64-pc-windows-gnu target. About 25 s and 206 MB without
# recommends (114 packages and 1.4 GB with them). Needs root. Safe to run again: it installs only what is missing.
# Recipe: ../shared/reference/wine-rig/README.md.
set -euo pipefail

need=()
command -v wine >/dev/null 2>&1 || need+=(wine wine64)
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
# The rig detaches its clean-up watchdog with setsid and the sftp wrapper uses unshare (util-linux).
command -v setsid >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1 || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi
if command -v rustup >/dev/null 2>&1; then
  rustup target list --installed | grep -qx x86_64-pc-windows-gnu || rustup target add x86_64-pc-windows-gnu
else
  # The distribution's Rust has no Windows standard library; the Wine tests need rustup's.
  echo "wine-setup: rustup is not installed; the Wine tests need \`rustup target add x86_64-pc-windows-gnu\`" >&2
  exit 1
fi
wine --version

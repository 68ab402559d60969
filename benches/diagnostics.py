#!/usr/bin/env python3
"""Diagnostics benchmark: how the time to report N errors grows with N, for `wmrender validate` and for both KRM
modes (`wmrender krm` reading a ResourceList on stdin, annotated with kpt's config.kubernetes.io/path; and
`wmrender krm FILE` as kustomize's exec plugin). Both KRM modes place each diagnostic in the user's file, so their
time should grow with the errors as validate's does: from N to 4N errors linear work grows 4 times, work quadratic
in the errors 16 times. `validate` is the baseline measured in the same run; the column to read is each KRM mode's
growth divided by validate's (about 1.0 when placing is linear, about 4 when it is quadratic).

Usage: python3 benches/diagnostics.py [--runs N] [--bin PATH]
Without --bin it builds the release wmrender (into $CARGO_TARGET_DIR, default target/).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")

INPUTS = """apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata:
  name: bench-diagnostics
spec:
  infrastructureID: bench-00000
  apiServerInternalURL: https://api-int.bench.example.com:6443
  platform:
    none: {}
  byoh:
  - address: 10.0.0.5
    username: Administrator
  network:
    hybridClusterNetwork: [10.132.0.0/14]
"""


def with_unknown_keys(n):
    """The inputs with `n` unknown keys under spec: n errors, each to be placed at its line."""
    keys = "".join(f"  unknown{i}: {i}\n" for i in range(n))
    return INPUTS.replace("spec:\n", "spec:\n" + keys, 1)


def resource_list(config, path):
    """A ResourceList whose functionConfig is `config`, annotated the way kpt annotates it."""
    body = "".join(f"  {line}\n" for line in config.splitlines())
    body = body.replace("    name: bench-diagnostics\n",
                        f"    name: bench-diagnostics\n    annotations:\n      config.kubernetes.io/path: '{path}'\n", 1)
    return "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\nfunctionConfig:\n" + body


def seconds(argv, cwd, stdin=None):
    """Wall seconds of one run; every case is an input with errors, so it must exit 2."""
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if proc.returncode != 2:
        sys.exit(f"{argv} exited {proc.returncode}, expected 2 (errors reported)")
    return wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", help="a wmrender binary to measure instead of building the release one")
    args = ap.parse_args()
    binary = args.bin
    if not binary:
        subprocess.run(["cargo", "build", "--release", "--locked", "--quiet", "-p", "wmrender"], cwd=ROOT, check=True)
        binary = os.path.join(os.path.abspath(os.path.join(ROOT, TARGET)), "release", "wmrender")
    work = tempfile.mkdtemp(prefix="wmrender-bench-")
    try:
        repo = os.path.join(work, "repo")
        pkg = os.path.join(repo, "pkg")
        os.makedirs(os.path.join(repo, ".git"))
        os.makedirs(pkg)
        with open(os.path.join(pkg, "kustomization.yaml"), "w") as f:
            f.write("generators:\n- wmrender.yaml\n")
        modes = ["validate", "krm (stdin, kpt path)", "krm FILE (kustomize)"]
        medians = {}
        for n in (12_000, 48_000):
            inputs = with_unknown_keys(n)
            with open(os.path.join(pkg, "wmrender.yaml"), "w") as f:
                f.write(inputs)
            listing = resource_list(inputs, "pkg/wmrender.yaml").encode()
            walls = [[], [], []]
            for _ in range(args.runs):  # the three alternate, so that all meet the machine in the same state
                walls[0].append(seconds([binary, "validate", "-f", "wmrender.yaml"], pkg))
                walls[1].append(seconds([binary, "krm"], repo, listing))
                walls[2].append(seconds([binary, "krm", "wmrender.yaml"], pkg))
            medians[n] = [statistics.median(w) for w in walls]
        print(f"{'mode':<24} {'12,000 errors':>14} {'48,000 errors':>14} {'growth':>8} {'vs validate':>12}")
        base = medians[48_000][0] / medians[12_000][0]
        for i, mode in enumerate(modes):
            growth = medians[48_000][i] / medians[12_000][i]
            print(f"{mode:<24} {medians[12_000][i] * 1000:>11.1f} ms {medians[48_000][i] * 1000:>11.1f} ms "
                  f"{growth:>7.1f}x {growth / base:>11.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Render benchmark: median wall time and peak RSS of `wmrender render`, against `cp -r` of the same output tree
measured in the same run as the floor (the least any tool that writes that tree must spend).

Both columns do the same work: each run writes the whole tree into a directory that does not exist yet (the
previous run's tree is deleted first, outside the timing). The two alternate, run by run, so that both meet the
disk in the same state.

Cases: the shipped AWS example; generated inputs with 200 and 2,000 BYOH hosts (5 and 50 MachineSets, 50 and 500
mirror entries); and mirror scaling: 1,000, 10,000 and 100,000 mirror entries over 500 registry hosts (one
hosts.toml each). Each step is ten times the last, so the ratio of their times shows whether growth is linear.
"B/mirror" is the peak RSS above that of the same input with one mirror entry, divided by the number of entries.

Below the table, the floor under the 2,000-host render that wmrender's own code cannot lower: the YAML parser
reading that input and nothing else (benches/yaml-floor, in-process, no start-up), set against the same case's
`cp -r`. Any goal stated against `cp -r` must leave room for it.

Usage: python3 benches/render.py [--runs N] [--bin PATH]   (TMPDIR=/dev/shm to measure on tmpfs)
It builds yaml-floor, and without --bin the release wmrender too (into $CARGO_TARGET_DIR, default target/). Needs
GNU time (apt install time); the time of its own fork and exec is in both columns alike.
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


def generate(path, hosts, sets, mirrors, registries=50):
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    lines = [
        "apiVersion: wmrender.dev/v1alpha1",
        "kind: ClusterInputs",
        "metadata:",
        "  name: bench",
        "spec:",
        "  infrastructureID: bench-1a2b3",
        "  apiServerInternalURL: https://api-int.bench.example.com:6443",
        "  sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEivnOQOwpFfgIiplCNH1jWkEmNppWw2KdSLHn7d3tKp",
        "  platform:",
        "    aws:",
        "      region: us-east-1",
        "      ami: ami-0123456789abcdef0",
        "  machineSets:",
    ]
    for i in range(sets):
        lines += [f"  - name: bench-1a2b3-win-{i:03d}", f"    zone: {zones[i % 3]}", f"    replicas: {i % 4}"]
    lines.append("  byoh:")
    for i in range(hosts):
        lines += [f"  - address: win-{i:05d}.hosts.example.com", "    username: Administrator"]
    lines += ["  network:", "    hybridClusterNetwork: [10.132.0.0/14]", "  mirrors:", "    imageDigestMirrors:"]
    for i in range(mirrors):
        r = i % registries
        lines += [f"    - source: registry-{r}.example.com/team{i}/app",
                  f"      mirrors: [mirror.example.com:5000/r{r}/team{i}/app, backup-{r % 7}.example.com/team{i}/app]"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run(argv):
    """Wall seconds and peak RSS (KiB) of one command. RSS comes from GNU time: a child forked from Python would
    report Python's own pages as its peak."""
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    err = proc.stderr.decode()
    if proc.returncode != 0:
        sys.exit(f"{argv} failed:\n{err}")
    return wall, int(err.strip().splitlines()[-1])


def measure(argv, runs, before=None):
    walls, rss = [], 0
    for _ in range(runs):
        if before:
            before()
        wall, peak = run(argv)
        walls.append(wall)
        rss = max(rss, peak)
    return statistics.median(walls), rss


def measure_pair(render, out, copy, runs):
    """Render and `cp -r` of its output, alternately, so both see the disk in the same state (page cache,
    writeback): timed one block after the other, a disk that speeds up or slows down in between skews the ratio.
    Returns the medians and render's peak RSS."""
    render_walls, copy_walls, rss = [], [], 0
    for _ in range(runs):
        shutil.rmtree(out, ignore_errors=True)
        wall, peak = run(render)
        render_walls.append(wall)
        rss = max(rss, peak)
        shutil.rmtree(copy, ignore_errors=True)
        copy_walls.append(run(["cp", "-r", out, copy])[0])
    return statistics.median(render_walls), statistics.median(copy_walls), rss


def fresh(path):
    """Runs before each timed run: the command writes into a directory that does not exist."""
    return lambda: shutil.rmtree(path, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--bin", help="a wmrender binary to measure instead of building the release one")
    args = ap.parse_args()
    binary = args.bin
    packages = ["-p", "yaml-floor"] + ([] if binary else ["-p", "wmrender"])
    subprocess.run(["cargo", "build", "--release", "--locked", "--quiet", *packages], cwd=ROOT, check=True)
    release = os.path.join(os.path.abspath(os.path.join(ROOT, TARGET)), "release")
    binary = binary or os.path.join(release, "wmrender")
    work = tempfile.mkdtemp(prefix="wmrender-bench-")
    try:
        large = os.path.join(work, "large.yaml")
        small = os.path.join(work, "small.yaml")
        generate(large, 2000, 50, 500)
        generate(small, 200, 5, 50)
        cases = [("examples/aws", os.path.join(ROOT, "examples/aws/wmrender.yaml"), 0),
                 ("generated 200 hosts / 5 sets / 50 mirrors", small, 0),
                 ("generated 2000 hosts / 50 sets / 500 mirrors", large, 0)]
        for n in (1000, 10000, 100000):
            path = os.path.join(work, f"m{n}.yaml")
            generate(path, 1, 1, n, registries=500)
            cases.append((f"{n:,} mirror entries / 500 registry hosts", path, n))
        out = os.path.join(work, "out")
        copy = os.path.join(work, "copy")
        one = os.path.join(work, "m1.yaml")
        generate(one, 1, 1, 1, registries=500)
        _, one_rss = measure([binary, "render", "-f", one, "-o", out], args.runs, before=fresh(out))
        print(f"{'case':<46} {'render median':>14} {'cp -r median':>13} {'ratio':>7} {'peak RSS':>10} "
              f"{'B/mirror':>9}")
        copy_walls = {}
        for name, inputs, mirrors in cases:
            render_wall, cp_wall, rss = measure_pair([binary, "render", "-f", inputs, "-o", out], out, copy, args.runs)
            copy_walls[inputs] = cp_wall
            files = sum(len(f) for _, _, f in os.walk(out))
            per_mirror = f"{(rss - one_rss) * 1024 / (mirrors - 1):>9.0f}" if mirrors else f"{'':>9}"
            print(f"{name:<46} {render_wall * 1000:>11.2f} ms {cp_wall * 1000:>10.2f} ms "
                  f"{render_wall / cp_wall:>6.1f}x {rss / 1024:>7.1f} MiB {per_mirror}   ({files} files)")
        floor = subprocess.run([os.path.join(release, "yaml-floor"), large, str(args.runs)], check=True,
                               stdout=subprocess.PIPE, text=True).stdout
        print("the YAML parser alone on the 2000-host input (in-process, median), against that case's cp -r:")
        labels = {"events": "granit-parser events, nothing kept", "serde-saphyr": "serde-saphyr, building nothing"}
        for line in floor.splitlines():
            name, seconds = line.split()
            print(f"  {labels.get(name, name):<44} {float(seconds) * 1000:>11.2f} ms {'':>13} "
                  f"{float(seconds) / copy_walls[large]:>6.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

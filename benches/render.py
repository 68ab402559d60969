#!/usr/bin/env python3
"""Render benchmark: median wall time, CPU time (user + system) and peak RSS of `wmrender render`, against `cp -r` of
the same output tree measured in the same run as the floor (the least any tool that writes that tree must spend).

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

Instruction counts (valgrind's callgrind; the same on a busy machine as on a quiet one, where wall time is not):
`wmrender render` beside the two yaml-floor passes on the same input, each a whole process (start-up and reading
the file included), as ratios: serde-saphyr's pass into `IgnoredAny`, and granit-parser's events alone. Two parts
of wmrender's count are shown too: its reader (the located tree built from the events: `inputs::yaml::build`) and
SHA-256 (manifest.json and the inputs digest). valgrind does not run the SHA instructions (SHA-NI) most x86 CPUs
have, so under it sha2 takes its portable path, which costs far more than it does natively; that part is the
count to discount when comparing with wall time. A normal run counts the 2,000-host case when valgrind is
installed; --instructions counts it and the 10,000 and 100,000-entry cases and times nothing (about five minutes,
most of it the 100,000-entry render under callgrind).

Usage: python3 benches/render.py [--runs N] [--bin PATH] [--instructions]   (TMPDIR=/dev/shm to measure on tmpfs)
It builds the release wmrender and yaml-floor together (into $CARGO_TARGET_DIR, default target/); --bin runs
another wmrender against that yaml-floor. Needs
GNU time (apt install time); the time of its own fork and exec is in both columns alike. valgrind (apt install
valgrind) for the instruction counts.
"""
import argparse
import os
import re
import resource
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
    """Wall seconds, CPU seconds (user + system) and peak RSS (KiB) of one command. RSS comes from GNU time: a child
    forked from Python would report Python's own pages as its peak. CPU is what the children waited for used (the
    command and the GNU time around it), which a busy machine stretches far less than wall time."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    err = proc.stderr.decode()
    if proc.returncode != 0:
        sys.exit(f"{argv} failed:\n{err}")
    return wall, cpu, int(err.strip().splitlines()[-1])


def measure(argv, runs, before=None):
    walls, rss = [], 0
    for _ in range(runs):
        if before:
            before()
        wall, _, peak = run(argv)
        walls.append(wall)
        rss = max(rss, peak)
    return statistics.median(walls), rss


def measure_pair(render, out, copy, runs):
    """Render and `cp -r` of its output, alternately, so both see the disk in the same state (page cache,
    writeback): timed one block after the other, a disk that speeds up or slows down in between skews the ratio.
    Returns the medians of wall and CPU time, (render, cp -r) each, and render's peak RSS."""
    walls, cpus, rss = ([], []), ([], []), 0
    for _ in range(runs):
        shutil.rmtree(out, ignore_errors=True)
        wall, cpu, peak = run(render)
        walls[0].append(wall)
        cpus[0].append(cpu)
        rss = max(rss, peak)
        shutil.rmtree(copy, ignore_errors=True)
        wall, cpu, _ = run(["cp", "-r", out, copy])
        walls[1].append(wall)
        cpus[1].append(cpu)
    median = statistics.median
    return (median(walls[0]), median(walls[1])), (median(cpus[0]), median(cpus[1])), rss


def callgrind(argv, out):
    """Instructions executed by `argv` (every process it is, start-up included), and callgrind's profile in `out`."""
    proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        sys.exit(f"{argv} under valgrind failed:\n{proc.stderr.decode()[-2000:]}")
    with open(out) as f:
        totals = [line for line in f if line.startswith("totals:")]
    return int(totals[-1].split()[1])


def inclusive(profile, symbols):
    """Instructions spent in each of `symbols` and what it calls, from a callgrind profile (0 when a symbol is not
    there, e.g. inlined into its caller by a later compiler)."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", profile],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    found = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([\d. ]+%\)\s+\S*?:(\S+) \[", line)
        if m:
            found.setdefault(m.group(2), int(m.group(1).replace(",", "")))
    return [found.get(s, 0) for s in symbols]


# Parts of wmrender's count shown beside it: the reader, and SHA-256 (see the module's comment).
READER = "wmrender::inputs::yaml::build::documents"
SHA256 = "sha2::sha256::compress256"


def count_instructions(binary, floor, cases, work):
    """The instruction table: each case's render beside the yaml-floor passes on its input, in this run."""
    print("instructions (callgrind), each a whole process; ratios against the passes on the same input:")
    print(f"{'case':<46} {'wmrender':>9} {'serde-saphyr pass':>20} {'events':>14} {'reader':>14} {'SHA-256':>8}"
          f" {'without SHA-256':>16}")
    out = os.path.join(work, "out")
    profile = os.path.join(work, "callgrind.out")
    for name, inputs in cases:
        shutil.rmtree(out, ignore_errors=True)
        total = callgrind([binary, "render", "-f", inputs, "-o", out], profile)
        reader, sha = inclusive(profile, [READER, SHA256])
        serde = callgrind([floor, inputs, "1", "serde-saphyr"], profile)
        events = callgrind([floor, inputs, "1", "events"], profile)
        reader_col = f"{reader / 1e6:>6.1f} M {reader / events:>4.2f}x" if reader else f"{'-':>14}"
        print(f"{name:<46} {total / 1e6:>7.1f} M {serde / 1e6:>9.1f} M {total / serde:>6.2f}x "
              f"{events / 1e6:>6.1f} M {total / events:>4.2f}x {reader_col} {sha / 1e6:>6.1f} M"
              f" {(total - sha) / serde:>15.2f}x")
    print("  (reader: the located tree, inputs::yaml::build, with its ratio to the events pass; SHA-256 runs sha2's "
          "portable code under valgrind; the last column is wmrender less SHA-256, against the serde-saphyr pass)")


def fresh(path):
    """Runs before each timed run: the command writes into a directory that does not exist."""
    return lambda: shutil.rmtree(path, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--bin", help="a wmrender binary to measure instead of the release one this builds")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions for the 2,000-host, 10,000 and 100,000-entry cases; time nothing")
    args = ap.parse_args()
    valgrind = shutil.which("valgrind") and shutil.which("callgrind_annotate")
    if args.instructions and not valgrind:
        sys.exit("--instructions needs valgrind (apt install valgrind)")
    # yaml-floor is built with wmrender, in one cargo invocation, so that the parser has the same features in both
    # (cargo unifies them: the default `cluster` feature's kube turns on granit-parser's comment tracking).
    subprocess.run(["cargo", "build", "--release", "--locked", "--quiet", "-p", "yaml-floor", "-p", "wmrender"],
                   cwd=ROOT, check=True)
    release = os.path.join(os.path.abspath(os.path.join(ROOT, TARGET)), "release")
    binary = args.bin or os.path.join(release, "wmrender")
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
        floor = os.path.join(release, "yaml-floor")
        large_case = ("generated 2000 hosts / 50 sets / 500 mirrors", large)
        if args.instructions:
            count_instructions(binary, floor, [large_case] + [(n, p) for n, p, m in cases if m >= 10000], work)
            return
        out = os.path.join(work, "out")
        copy = os.path.join(work, "copy")
        one = os.path.join(work, "m1.yaml")
        generate(one, 1, 1, 1, registries=500)
        _, one_rss = measure([binary, "render", "-f", one, "-o", out], args.runs, before=fresh(out))
        print(f"{'case':<46} {'render wall':>12} {'cp -r wall':>11} {'ratio':>7} {'render CPU':>11} "
              f"{'cp -r CPU':>10} {'ratio':>7} {'peak RSS':>10} {'B/mirror':>9}")
        copy_walls = {}
        for name, inputs, mirrors in cases:
            (render_wall, cp_wall), (render_cpu, cp_cpu), rss = measure_pair(
                [binary, "render", "-f", inputs, "-o", out], out, copy, args.runs)
            copy_walls[inputs] = cp_wall
            files = sum(len(f) for _, _, f in os.walk(out))
            per_mirror = f"{(rss - one_rss) * 1024 / (mirrors - 1):>9.0f}" if mirrors else f"{'':>9}"
            print(f"{name:<46} {render_wall * 1000:>9.2f} ms {cp_wall * 1000:>8.2f} ms {render_wall / cp_wall:>6.1f}x "
                  f"{render_cpu * 1000:>8.2f} ms {cp_cpu * 1000:>7.2f} ms {render_cpu / cp_cpu:>6.1f}x "
                  f"{rss / 1024:>7.1f} MiB {per_mirror}   ({files} files)")
        floor_times = subprocess.run([floor, large, str(args.runs)], check=True, stdout=subprocess.PIPE,
                                     text=True).stdout
        print("the YAML parser alone on the 2000-host input (in-process, median), against that case's cp -r:")
        labels = {"events": "granit-parser events, nothing kept", "serde-saphyr": "serde-saphyr, building nothing"}
        for line in floor_times.splitlines():
            name, seconds = line.split()
            print(f"  {labels.get(name, name):<44} {float(seconds) * 1000:>11.2f} ms {'':>13} "
                  f"{float(seconds) / copy_walls[large]:>6.1f}x")
        if valgrind:
            print()
            count_instructions(binary, floor, [large_case], work)
        else:
            print("(valgrind is not installed: no instruction counts; apt install valgrind)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Sync benchmark against a real OpenSSH server on 127.0.0.1, each number a ratio to a baseline measured in the
same run on the same sshd:

1. upload of a 100 MB payload file to a fresh node, `wmrender sync` vs OpenSSH `scp` of the same file; also the
   posix apply step on its own (run directly on the node root the sync filled), so the transport's share shows;
2. a no-op sync of 20 nodes (`--parallel 8`) vs 20 bare `ssh true` connections with the same parallelism;
3. bytes sent for a one-file change (the report's bytesSent), per byte of the changed file, against the goal of
   the file and 2 KiB: a one-file change sends the file, a small journal and the manifest's update (the changed
   entry over the manifest as it is), and leaves the node manifest as it was.

Needs root, openssh-server and openssh-client. Usage: python3 benches/sync.py [--runs N]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The binary `cargo build --release` writes, wherever CARGO_TARGET_DIR puts it.
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "wmrender")
INPUTS = """apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata: {name: bench}
spec:
  infrastructureID: bench-00000
  apiServerInternalURL: https://api-int.bench.example.com:6443
  platform: {none: {}}
  byoh: [{address: 10.0.0.5, username: Administrator}]
  network: {hybridClusterNetwork: [10.132.0.0/14]}
  operator: {install: true}
  mirrors:
    imageTagMirrors:
    - source: quay.io/openshift
      mirrors: [MIRROR/quay/openshift]
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sshd(d):
    for name, kind in [("host", "ed25519"), ("client", "ed25519")]:
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", f"{d}/{name}"], check=True)
    shutil.copy(f"{d}/client.pub", f"{d}/authorized_keys")
    os.makedirs("/run/sshd", exist_ok=True)
    port = free_port()
    with open(f"{d}/sshd_config", "w") as f:
        f.write(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nPidFile {d}/sshd.pid\n"
                f"AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\nStrictModes no\nUsePAM no\n"
                "Subsystem sftp internal-sftp\nMaxStartups 100:30:200\nMaxSessions 64\n")
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", f"{d}/sshd_config", "-E", f"{d}/sshd.log"])
    for _ in range(1000):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.005)
    kind, b64 = open(f"{d}/host.pub").read().split()[:2]
    with open(f"{d}/known_hosts", "w") as f:
        f.write(f"[127.0.0.1]:{port} {kind} {b64}\n")
    return proc, port


def timed(argv, **kw):
    start = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    wall = time.perf_counter() - start
    if p.returncode not in (0,):
        sys.exit(f"{argv[:3]} failed ({p.returncode}):\n{p.stderr.decode()[-2000:]}")
    return wall, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=ROOT, check=True)
    d = tempfile.mkdtemp(prefix="wmrender-syncbench-")
    proc, port = start_sshd(d)
    try:
        with open(f"{d}/wmrender.yaml", "w") as f:
            f.write(INPUTS.replace("MIRROR", "mirror.example.com:5000"))
        subprocess.run([BIN, "render", "-f", f"{d}/wmrender.yaml", "-o", f"{d}/rendered"], check=True,
                       stderr=subprocess.DEVNULL)
        os.makedirs(f"{d}/payload/C/k")
        with open(f"{d}/payload/C/k/kubelet.exe", "wb") as f:
            f.write(os.urandom(100 * 1024 * 1024))

        def inventory(n, tag):
            path = f"{d}/nodes-{tag}.yaml"
            with open(path, "w") as f:
                f.write("nodes:\n")
                for i in range(n):
                    root = f"{d}/{tag}-{i:02d}"
                    os.makedirs(root, exist_ok=True)
                    f.write(f"- {{name: {tag}-{i:02d}, address: 127.0.0.1, port: {port}, user: root, "
                            f"profile: posix, root: {root}}}\n")
            return path

        def sync(inv, *extra):
            return timed([BIN, "sync", "--rendered", f"{d}/rendered", "--inventory", inv, "--identity",
                          f"{d}/client", "--known-hosts", f"{d}/known_hosts", "--output", "json", *extra])

        ssh = ["-i", f"{d}/client", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={d}/known_hosts",
               "-o", "StrictHostKeyChecking=yes"]

        # 1. 100 MB upload to a fresh node vs scp.
        apply_step = open(os.path.join(ROOT, "src", "delivery", "apply-posix.sh")).read()
        up, cp, ap = [], [], []
        for r in range(args.runs):
            wall, _ = sync(inventory(1, f"up{r}"), "--payload", f"{d}/payload")
            up.append(wall)
            wall, _ = timed(["sh", "-c", apply_step, "wmrender-apply", f"{d}/up{r}-00", ""])
            ap.append(wall)
            os.makedirs(f"{d}/scp{r}", exist_ok=True)
            wall, _ = timed(["scp", "-q", *ssh, "-P", str(port), f"{d}/payload/C/k/kubelet.exe",
                             f"root@127.0.0.1:{d}/scp{r}/kubelet.exe"])
            cp.append(wall)
            shutil.rmtree(f"{d}/up{r}-00")
            shutil.rmtree(f"{d}/scp{r}")
        u, s, a = statistics.median(up), statistics.median(cp), statistics.median(ap)
        print(f"100 MB payload upload: wmrender sync {u * 1000:.0f} ms, scp {s * 1000:.0f} ms, ratio {u / s:.2f}x; "
              f"of which the posix apply step (it checks each file's presence and size) {a * 1000:.0f} ms, "
              f"without it {(u - a) / s:.2f}x")

        # 2. No-op sync of 20 nodes vs 20 bare connections, parallelism 8.
        inv20 = inventory(20, "n")
        sync(inv20, "--parallel", "8")
        noop, bare = [], []
        for _ in range(args.runs):
            wall, out = sync(inv20, "--parallel", "8")
            assert all(n["status"] == "unchanged" for n in json.loads(out)["nodes"])
            noop.append(wall)
            wall, _ = timed(["sh", "-c", f"seq 20 | xargs -P 8 -I{{}} ssh {' '.join(ssh)} -p {port} root@127.0.0.1 true"])
            bare.append(wall)
        n, b = statistics.median(noop), statistics.median(bare)
        print(f"no-op sync of 20 nodes: wmrender {n * 1000:.0f} ms, 20 x `ssh true` {b * 1000:.0f} ms, ratio {n / b:.2f}x")

        # 3. Bytes sent for a one-file change.
        with open(f"{d}/wmrender.yaml", "w") as f:
            f.write(INPUTS.replace("MIRROR", "mirror-b.example.com:5000"))
        subprocess.run([BIN, "render", "-f", f"{d}/wmrender.yaml", "-o", f"{d}/rendered"], check=True,
                       stderr=subprocess.DEVNULL)
        _, out = sync(inventory(1, "n"))
        node = json.loads(out)["nodes"][0]
        size = os.path.getsize(f"{d}/rendered/node/C/k/containerd/registries/quay.io/hosts.toml")
        manifest = os.path.getsize(f"{d}/n-00/C/k/wmrender/manifest.json")
        update = os.path.getsize(f"{d}/n-00/C/k/wmrender/manifest.json.wmrender-update")
        sent = node["bytesSent"]
        print(f"one-file change: {node['changed']} -> {sent} bytes sent for a {size}-byte file, "
              f"{sent - size} over it (goal: 2,048), {sent / size:.1f} bytes per changed byte (the manifest's "
              f"update {update} bytes, the journal {sent - size - update} bytes; the {manifest}-byte node manifest "
              f"is not sent)")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Node agent benchmark under Wine, each number a ratio to a baseline measured in the same run on the same Wine
machine (a warm wineserver kept up with `wineserver -p`): `wine cmd /c exit` (starting a Windows process), run
alternately with the case measured, so both see the same load on a shared machine.

1. `wmrender-node apply` on an unchanged, converged node (no step runs, nothing changes);
2. `wmrender-node apply` after a one-file change (kubelet.conf: kubelet stopped and started again);
3. the first `wmrender-node apply` on the fresh node (3 services and the agent's own created and started, the
   once-step run): one sample, against the baseline's median.

The node is the Wine rig's (tests/support/wine.rs): a fresh prefix with the ProcessPrng shim, the fake
`powershell.exe` answering `{"ok":true}` for every step, and the fake service at every service binary path. The
bundle is a small hand-made one in the node contract's form (three services; containerd, kubelet through
kube-log-runner, windows_exporter), staged the way sync leaves it.

Needs wine, wine64, gcc-mingw-w64-x86-64 and the x86_64-pc-windows-gnu Rust target (tests/e2e/wine-setup.sh).
Usage: python3 benches/agent.py [--runs N]
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = "x86_64-pc-windows-gnu"
WINE_TARGET = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "wine")
EXES = os.path.join(WINE_TARGET, TARGET, "release")
LIMIT = 300  # seconds for any one command


def build():
    subprocess.run(["cargo", "build", "--release", "--locked", "--target", TARGET, "-p", "wmrender-node",
                    "-p", "wine-fakes", "--target-dir", WINE_TARGET], cwd=ROOT, check=True, timeout=1800)
    subprocess.run(["x86_64-w64-mingw32-gcc", "-shared", "-O2", "-s", "-o", os.path.join(EXES, "bcryptprimitives.dll"),
                    os.path.join(ROOT, "tests", "wine", "bcryptprimitives.c"), "-ladvapi32"], check=True, timeout=120)


class Machine:
    def __init__(self, prefix):
        self.prefix = prefix
        self.env = dict(os.environ, WINEPREFIX=prefix, WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
        self.env.pop("DISPLAY", None)

    def run(self, *args, check=True, quiet=False):
        # Quiet for commands that leave a process holding their output (wineserver -p daemonises; the first Wine
        # process of a boot starts services.exe): capturing would wait for it.
        out = subprocess.DEVNULL if quiet else subprocess.PIPE
        r = subprocess.run(list(args), env=self.env, stdout=out, stderr=out, text=True, timeout=LIMIT)
        if check and r.returncode != 0:
            sys.exit(f"{args} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    def c(self, path):
        return os.path.join(self.prefix, "drive_c", *path[3:].split("\\"))

    def write(self, path, data):
        local = self.c(path)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with open(local + ".bench-tmp", "wb") as f:
            f.write(data)
        os.replace(local + ".bench-tmp", local)

    def boot(self):
        self.run("wineboot", "-i", quiet=True)
        self.run("wineserver", "-w", quiet=True)
        sys32 = os.path.join(self.prefix, "drive_c", "windows", "system32")
        shutil.copy(os.path.join(EXES, "bcryptprimitives.dll"), sys32)
        shutil.copy(os.path.join(EXES, "fake-powershell.exe"),
                    os.path.join(sys32, "WindowsPowerShell", "v1.0", "powershell.exe"))
        os.makedirs(self.c("C:\\wine-fakes"), exist_ok=True)
        self.write("C:\\wine-fakes\\powershell-responses.json", json.dumps({"*": [{"stdout": "{\"ok\":true}\n"}]}).encode())
        self.run("wineserver", "-p", quiet=True)
        self.run("wine", "cmd", "/c", "exit", quiet=True)

    def shutdown(self):
        self.run("wineserver", "-k", check=False, quiet=True)
        self.run("wineserver", "-w", check=False, quiet=True)


def service(name, command, deps=(), files=(), binaries=(), node_variables=()):
    return {"name": name, "description": f"OpenShift managed {name} (wmrender)", "command": command,
            "dependencies": list(deps), "nodeVariables": list(node_variables), "files": list(files),
            "binaries": list(binaries), "secrets": []}


SERVICES = {"services": [
    service("containerd", r"C:\k\containerd\containerd.exe --config C:\k\containerd\containerd_conf.toml --run-service",
            files=[r"C:\k\containerd\containerd_conf.toml"], binaries=[r"C:\k\containerd\containerd.exe"]),
    service("kubelet", r"C:\k\kube-log-runner.exe -log-file=C:\var\log\kubelet\kubelet.log C:\k\kubelet.exe "
            r"--config=C:\k\kubelet.conf --windows-service --node-ip=NODE_IP", deps=["containerd"],
            files=[r"C:\k\kubelet.conf"], binaries=[r"C:\k\kubelet.exe", r"C:\k\kube-log-runner.exe"],
            node_variables=["NODE_IP"]),
    service("windows_exporter", r"C:\k\windows_exporter.exe --web.config.file C:\k\windows-exporter-webconfig.yaml",
            files=[r"C:\k\windows-exporter-webconfig.yaml"], binaries=[r"C:\k\windows_exporter.exe"]),
]}
SETTINGS = {"platform": "none", "nodeName": {"from": "dns-host-name"},
            "directories": [r"C:\var\log\kubelet"], "environment": {},
            "steps": [{"name": "defender-exclusion", "script": r"C:\k\wmrender\defender-exclusion.ps1", "args": [],
                       "when": "once"}]}


def stage(m, files, binaries):
    """Writes the node's files as sync does (only those that differ; binaries that differ staged beside their path)
    and the manifest."""
    entries = []
    for path, (kind, data) in sorted(files.items()):
        target = path
        on_node = open(m.c(path), "rb").read() if os.path.exists(m.c(path)) else None
        staged = path in binaries and on_node is not None and on_node != data
        if staged:
            target = path + ".wmrender-staged"
        if on_node != data:
            m.write(target, data)
        entry = {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "kind": kind}
        if staged:
            entry["staged"] = True
        entries.append(entry)
    manifest = {"wmrender": "bench", "files": entries, "applied": False}
    m.write(r"C:\k\wmrender\manifest.json", json.dumps(manifest, indent=2).encode())


def apply(m):
    t = time.perf_counter()
    r = m.run("wine", r"C:\k\wmrender\wmrender-node.exe", "apply", check=False)
    elapsed = time.perf_counter() - t
    lines = [l for l in r.stdout.splitlines() if l.strip().startswith("{")]
    result = json.loads(lines[-1]) if lines else {}
    if result.get("status") != "converged":
        sys.exit(f"apply did not converge (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
    return elapsed, result


def baseline(m):
    t = time.perf_counter()
    m.run("wine", "cmd", "/c", "exit", quiet=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    for tool in ["wine", "wineserver", "wineboot", "x86_64-w64-mingw32-gcc"]:
        if shutil.which(tool) is None:
            sys.exit(f"benches/agent.py needs `{tool}`: run `bash tests/e2e/wine-setup.sh`")
    build()
    work = tempfile.mkdtemp(prefix="wmrender-agent-bench-")
    m = Machine(os.path.join(work, "prefix"))
    try:
        m.boot()
        # The agent's run loop must not race the measured passes.
        m.run("wine", "reg", "add", r"HKLM\SYSTEM\CurrentControlSet\Control\Session Manager\Environment",
              "/v", "WMRENDER_NODE_INTERVAL", "/d", "3600", "/f")
        m.shutdown()  # a reboot: services see machine variables from the next boot on
        m.run("wineserver", "-p", quiet=True)
        m.run("wine", "cmd", "/c", "exit", quiet=True)
        fake = open(os.path.join(EXES, "fake-service.exe"), "rb").read()
        files = {r"C:\k\wmrender\services.json": ("bundle", json.dumps(SERVICES, indent=2).encode()),
                 r"C:\k\wmrender\node.json": ("bundle", json.dumps(SETTINGS, indent=2).encode()),
                 r"C:\k\wmrender\defender-exclusion.ps1": ("bundle", b"# rendered step\n"),
                 r"C:\k\containerd\containerd_conf.toml": ("bundle", b"version = 2\n"),
                 r"C:\k\kubelet.conf": ("bundle", b"{}\n"),
                 r"C:\k\windows-exporter-webconfig.yaml": ("bundle", b"{}\n"),
                 r"C:\k\wmrender\wmrender-node.exe": ("payload", open(os.path.join(EXES, "wmrender-node.exe"), "rb").read())}
        binaries = {b for s in SERVICES["services"] for b in s["binaries"]}
        for b in binaries:
            files[b] = ("payload", fake)
        stage(m, files, binaries)
        first, result = apply(m)
        if result.get("created") != ["containerd", "kubelet", "windows_exporter", "wmrender-node"]:
            sys.exit(f"the first apply created {result.get('created')}")
        time.sleep(5)  # the agent service, started by the first apply, makes its first pass
        base, unchanged, changed = [], [], []
        for _ in range(args.runs):
            base.append(baseline(m))
            elapsed, result = apply(m)
            if any(result.get(k) for k in ("created", "updated", "started", "restarted", "steps", "replaced")):
                sys.exit(f"the unchanged pass changed something: {result}")
            unchanged.append(elapsed)
        for i in range(args.runs):
            files[r"C:\k\kubelet.conf"] = ("bundle", f"{{\"bench\": {i}}}\n".encode())
            stage(m, files, binaries)
            base.append(baseline(m))
            elapsed, result = apply(m)
            if result.get("restarted") != ["kubelet"]:
                sys.exit(f"the one-file change restarted {result.get('restarted')}, not kubelet alone")
            changed.append(elapsed)
        b = statistics.median(base)
        print(f"| case | `wmrender-node apply` | ratio to `wine cmd /c exit` ({b * 1000:.0f} ms) |")
        print("| --- | --- | --- |")
        for what, times in [("unchanged node (nothing runs, nothing changes)", unchanged),
                            ("one file changed (kubelet.conf: kubelet restarted)", changed),
                            ("first apply (3 services and the agent's own created and started; one sample)", [first])]:
            t = statistics.median(times)
            print(f"| {what} | {t * 1000:.0f} ms | {t / b:.2f}× |")
        print(f"(medians of {args.runs} runs each, the baseline's of {len(base)} alternating with them; "
              f"Wine {m.run('wine', '--version').stdout.strip()})")
    finally:
        m.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

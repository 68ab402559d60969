#!/usr/bin/env python3
"""Publish benchmark against Debian's docker-registry on 127.0.0.1 with TLS, each number against a baseline measured
in the same run on the same registry:

1. a 100 MB payload published (`wmrender publish --payload`) vs `skopeo copy` of an OCI layout holding the same
   file as one uncompressed layer, each to a fresh repository;
2. publishing an unchanged render again (nothing to send) vs `skopeo inspect --raw` of its manifest (one request
   for a manifest: the least a client that checks can do);
3. bytes on the wire (TLS records both ways, counted by a relay) for a one-file change of the rendered bundle, per
   byte of the changed file, with the tag's manifest size: the goal is the file + 2 KiB.

Needs docker-registry, skopeo and openssl (bash tests/setup.sh). Usage: python3 benches/publish.py [--runs N]
"""
import argparse
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "wmrender")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def timed(argv, **kw):
    t = time.perf_counter()
    run(argv, **kw)
    return time.perf_counter() - t


def start_registry(d):
    """docker-registry with a throwaway CA's certificate for 127.0.0.1; returns (process, address, CA file)."""
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=bench CA",
         "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem"])
    run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", f"{d}/reg.key",
         "-out", f"{d}/reg.csr"])
    with open(f"{d}/san.ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run(["openssl", "x509", "-req", "-in", f"{d}/reg.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
         "-CAcreateserial", "-days", "1", "-extfile", f"{d}/san.ext", "-out", f"{d}/reg.pem"])
    addr = f"127.0.0.1:{free_port()}"
    with open(f"{d}/config.yml", "w") as f:
        f.write(f"version: 0.1\nlog: {{level: error, accesslog: {{disabled: true}}}}\n"
                f"storage: {{filesystem: {{rootdirectory: {d}/data}}}}\n"
                f"http: {{addr: {addr}, tls: {{certificate: {d}/reg.pem, key: {d}/reg.key}}}}\n")
    proc = subprocess.Popen(["docker-registry", "serve", f"{d}/config.yml"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", int(addr.split(":")[1])), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        raise SystemExit("docker-registry did not listen")
    os.makedirs(f"{d}/certs", exist_ok=True)
    shutil.copy(f"{d}/ca.pem", f"{d}/certs/ca.crt")
    return proc, addr, f"{d}/ca.pem"


class Relay:
    """A TCP relay on 127.0.0.1 counting the bytes both ways."""

    def __init__(self, to):
        self.to = to
        self.bytes = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        host, port = self.to.split(":")
        while True:
            client, _ = self.sock.accept()
            server = socket.create_connection((host, int(port)))
            for a, b in [(client, server), (server, client)]:
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    def pipe(self, a, b):
        while True:
            data = a.recv(65536)
            if not data:
                try:
                    b.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            with self.lock:
                self.bytes += len(data)
            b.sendall(data)

    def take(self):
        with self.lock:
            n, self.bytes = self.bytes, 0
        return n


def oci_layout(d, blob):
    """An OCI layout with `blob` as its one uncompressed layer, for skopeo."""
    os.makedirs(f"{d}/blobs/sha256", exist_ok=True)

    def put(data):
        h = hashlib.sha256(data).hexdigest()
        with open(f"{d}/blobs/sha256/{h}", "wb") as f:
            f.write(data)
        return {"digest": f"sha256:{h}", "size": len(data)}

    layer = put(blob)
    config = put(json.dumps({"architecture": "amd64", "os": "windows",
                             "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}).encode())
    manifest = put(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
                               "layers": [dict(layer, mediaType="application/vnd.oci.image.layer.v1.tar")]}).encode())
    with open(f"{d}/index.json", "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [dict(manifest, mediaType="application/vnd.oci.image.manifest.v1+json",
                                                          annotations={"org.opencontainers.image.ref.name": "bench"})]}, f)
    with open(f"{d}/oci-layout", "w") as f:
        f.write('{"imageLayoutVersion": "1.0.0"}')


def render(d, name, host):
    with open(os.path.join(ROOT, "examples/aws/wmrender.yaml")) as f:
        text = f.read().replace("api-int.prod-east.example.com", host)
    with open(f"{d}/{name}.yaml", "w") as f:
        f.write(text)
    run([BIN, "render", "-f", f"{d}/{name}.yaml", "-o", f"{d}/{name}"])
    return f"{d}/{name}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    run(["cargo", "build", "--release", "--locked", "--bin", "wmrender"], cwd=ROOT)
    with tempfile.TemporaryDirectory() as d:
        proc, addr, ca = start_registry(d)
        try:
            # 1. A 100 MB payload: publish vs skopeo copy, each to a fresh repository, a fresh file each run (the
            #    registry could otherwise mount a blob it holds already, and skopeo's cache would ask it to).
            payload = f"{d}/payload"
            ours, base = [], []
            for i in range(runs):
                shutil.rmtree(payload, ignore_errors=True)
                shutil.rmtree(f"{d}/layout", ignore_errors=True)
                os.makedirs(f"{payload}/C/k")
                blob = os.urandom(100 * 1024 * 1024)
                with open(f"{payload}/C/k/kubelet.exe", "wb") as f:
                    f.write(blob)
                run([BIN, "payload", "list", payload])
                oci_layout(f"{d}/layout", blob)
                ours.append(timed([BIN, "publish", "--payload", payload, "--to", f"{addr}/p{i}/payload:bench",
                                   "--registry-ca", ca]))
                base.append(timed(["skopeo", "copy", "--quiet", "--dest-cert-dir", f"{d}/certs",
                                   f"oci:{d}/layout:bench", f"docker://{addr}/s{i}/payload:bench"]))
            u, s = statistics.median(ours), statistics.median(base)
            print(f"100 MB payload: wmrender publish {u * 1000:.0f} ms, skopeo copy {s * 1000:.0f} ms, "
                  f"ratio {u / s:.2f}x (medians of {runs})")

            # 2. An unchanged render published again vs reading its manifest once.
            first = render(d, "v1", "api-int.prod-east.example.com")
            to = f"{addr}/fleet/bundle:main"
            run([BIN, "publish", "--rendered", first, "--to", to, "--registry-ca", ca])
            again, inspect = [], []
            for _ in range(runs):
                again.append(timed([BIN, "publish", "--rendered", first, "--to", to, "--registry-ca", ca]))
                inspect.append(timed(["skopeo", "inspect", "--raw", "--cert-dir", f"{d}/certs", f"docker://{to}"]))
            a, i = statistics.median(again), statistics.median(inspect)
            print(f"unchanged bundle published again: {a * 1000:.0f} ms, skopeo inspect --raw {i * 1000:.0f} ms, "
                  f"ratio {a / i:.2f}x")

            # 3. Bytes on the wire for a one-file change (services.json), through the relay.
            relay = Relay(addr)
            second = render(d, "v2", "api-int.v2.example.com")
            to = f"{relay.addr}/wire/bundle:main"
            run([BIN, "publish", "--rendered", first, "--to", to, "--registry-ca", ca])
            whole = relay.take()
            run([BIN, "publish", "--rendered", second, "--to", to, "--registry-ca", ca])
            time.sleep(0.2)
            one = relay.take()
            changed = os.path.getsize(f"{second}/node/C/k/wmrender/services.json")
            manifest = run(["skopeo", "inspect", "--raw", "--cert-dir", f"{d}/certs",
                            f"docker://{addr}/wire/bundle:main"]).stdout
            print(f"one-file change: {one} bytes on the wire for a {changed}-byte file ({one / changed:.1f} per changed "
                  f"byte, {one - changed} over it; the goal is 2048 over); the tag's manifest is {len(manifest)} bytes; "
                  f"the first publish {whole} bytes")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()

#!/bin/sh
# Builds the wmrender image from examples/argocd/Containerfile with podman (a static musl wmrender and a static
# busybox, FROM scratch, `--network=none`), then runs it (1) as the Argo CD sidecar runs the plugin's generate
# command and (2) once as a KRM function under `kpt fn eval --image`, comparing both with the host binary.
#
# Usage: sh tests/e2e/container-image.sh            (from anywhere; needs podman, busybox-static, kpt, and either
#        the musl target (rustup target add x86_64-unknown-linux-musl; apt-get install musl-tools) or
#        WMRENDER_MUSL_BIN=path/to/static/wmrender)
# Prints SKIPPED and exits 0 when podman is not installed; any later failure exits non-zero.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HOST_BIN=${WMRENDER_HOST_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/wmrender}
IMAGE=localhost/wmrender:e2e

command -v podman >/dev/null 2>&1 || { echo "SKIPPED: podman is not installed"; exit 0; }
BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] || { echo "error: busybox-static is needed (apt-get install busybox-static)" >&2; exit 3; }

W=$(mktemp -d /tmp/wmrender-image-e2e.XXXXXX)
trap 'rm -rf "$W"' EXIT

# This machine's container runtime may refuse podman's default rlimits (runc: "error setting rlimit ... operation
# not permitted" inside an unprivileged container); an empty default_ulimits keeps the caller's limits.
printf '[containers]\ndefault_ulimits = []\n' > "$W/containers.conf"
export CONTAINERS_CONF="$W/containers.conf"

BIN=${WMRENDER_MUSL_BIN:-}
if [ -z "$BIN" ]; then
  echo "building the static wmrender (x86_64-unknown-linux-musl, release)"
  (cd "$ROOT" && CARGO_PROFILE_RELEASE_DEBUG=0 cargo build --locked --release --target x86_64-unknown-linux-musl --bin wmrender)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/x86_64-unknown-linux-musl/release/wmrender
fi
# A dynamically linked binary would not start in a scratch image.
if ldd "$BIN" >/dev/null 2>&1 && ! ldd "$BIN" 2>&1 | grep -q 'statically linked'; then
  echo "error: $BIN is dynamically linked" >&2; exit 3
fi

CTX=$W/ctx
mkdir -p "$CTX/rootfs/usr/local/bin" "$CTX/rootfs/bin" "$CTX/rootfs/etc" "$CTX/rootfs/tmp"
chmod 1777 "$CTX/rootfs/tmp"
cp "$BIN" "$CTX/rootfs/usr/local/bin/wmrender"
cp "$BUSYBOX" "$CTX/rootfs/bin/busybox"
for tool in sh grep head cat; do ln -s busybox "$CTX/rootfs/bin/$tool"; done
printf 'root:x:0:0:root:/:/bin/sh\nargocd:x:999:0:argocd:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' \
  > "$CTX/rootfs/etc/passwd"
printf 'root:x:0:\nargocd:x:999:\nnobody:x:65534:\n' > "$CTX/rootfs/etc/group"
cp "$ROOT/examples/argocd/Containerfile" "$CTX/Containerfile"

podman build --quiet --network=none -t "$IMAGE" -f "$CTX/Containerfile" "$CTX" >/dev/null
echo "built $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"

# (1) The plugin's generate command, as the sidecar runs it: in the application directory, as UID 999.
generate=$(sed -n '/^  generate:/,/^  [a-z]/p' "$ROOT/examples/argocd/plugin.yaml" | sed -n '/- |/,$p' | sed '1d;$d' | sed 's/^      //')
podman run --rm --network=none -v "$ROOT/examples/aws:/app:ro" -w /app --entrypoint /bin/sh "$IMAGE" \
  -c "$generate" > "$W/image.yaml"
(cd "$ROOT/examples/aws" && "$HOST_BIN" render --stdout --only cluster -f wmrender.yaml) > "$W/host.yaml"
cmp "$W/image.yaml" "$W/host.yaml"
echo "ok: the plugin's generate command in the image prints what the host binary prints"

# (2) kpt fn eval --image with podman as the runtime, against the same package run with --exec.
PKG=$W/pkg
mkdir -p "$PKG"
printf 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: windows\n' > "$PKG/Kptfile"
cp "$ROOT/examples/aws/wmrender.yaml" "$PKG/wmrender.yaml"
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  mode: 0400\n  flag: on\n' > "$PKG/app.yaml"
cp -r "$PKG" "$W/exec-pkg"
(cd "$PKG" && KPT_FN_RUNTIME=podman kpt fn eval --image "$IMAGE" --image-pull-policy never \
  --fn-config wmrender.yaml . >/dev/null)
(cd "$W/exec-pkg" && kpt fn eval --exec "$HOST_BIN krm" --fn-config wmrender.yaml . >/dev/null)
diff -r "$PKG" "$W/exec-pkg"
ls "$PKG/cluster" | grep -q '^machineset-' || { echo "error: no MachineSet written by the image" >&2; exit 1; }
echo "ok: kpt fn eval --image (podman) writes the same package as --exec"

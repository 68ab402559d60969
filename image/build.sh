#!/usr/bin/env bash
# Builds wmrender's container images as OCI image layouts, without a container daemon, byte for byte the same for the
# same inputs on any machine (the same Rust toolchain and Debian's tar and gzip):
#
#   bash image/build.sh wmrender OUT [--binary FILE]
#       The wmrender image: the controller's Deployment (`command: [wmrender]`), the Argo CD plugin's sidecar and the
#       KRM function (entrypoint `wmrender krm`), as examples/argocd/Containerfile describes it: a static wmrender
#       (built here for x86_64-unknown-linux-musl, release, unless --binary names one; about 4½ minutes the first
#       time on 2 cores), a static busybox for the
#       plugin's sh, grep, head and cat, /etc/passwd and /etc/group, /tmp; user 999:0 (numeric: the restricted Pod
#       Security level's runAsNonRoot can check it; group 0, as OpenShift runs an arbitrary user ID in group 0, so
#       the Deployment's secret files, 0440 and owned by root's group where no fsGroup is given, can be read).
#   bash image/build.sh payload DIR OUT
#       The payload image of the controller's init container, which runs `cp -R /payload/. <volume>`: the payload
#       directory DIR (what `wmrender payload pull` writes, with payload.json) under /payload, and busybox's cp.
#
# OUT is replaced with an OCI image layout (oci-layout, index.json, blobs/) holding one image, tagged with wmrender's
# version (the payload image: `payload`); the script prints the manifest's digest. Push it with skopeo:
#   skopeo copy oci:OUT:TAG docker://quay.io/you/wmrender:TAG
#
# Reproducible: every file's time is SOURCE_DATE_EPOCH (default: the last commit's time), owners are 0:0, modes are
# set here, entries are sorted, gzip stores no name or time, the JSON is written in one fixed form, and the binary is
# built with its paths remapped (--remap-path-prefix) in a target folder of its own (target/image). Same commit,
# same toolchain: same digest. Needs tar, gzip, sha256sum, busybox-static; for the build, the musl target
# (rustup target add x86_64-unknown-linux-musl) and musl-tools.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { echo "usage: bash image/build.sh wmrender OUT [--binary FILE] | payload DIR OUT" >&2; exit 2; }
kind=${1:-}; [ -n "$kind" ] || usage; shift
binary=
case $kind in
  wmrender)
    [ $# -ge 1 ] || usage; out=$1; shift
    if [ "${1:-}" = --binary ]; then
      [ $# -eq 2 ] || usage; binary=$2; shift 2
      [ -f "$binary" ] || { echo "image/build.sh: --binary $binary: no such file" >&2; exit 2; }
    fi
    [ $# -eq 0 ] || usage ;;
  payload)
    [ $# -eq 2 ] || usage; payload=$1; out=$2
    [ -f "$payload/payload.json" ] || { echo "image/build.sh: $payload is not a payload directory (no payload.json)" >&2; exit 2; } ;;
  *) usage ;;
esac

busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || ! "$busybox" --list >/dev/null 2>&1; then
  echo "image/build.sh: a static busybox is needed (apt-get install busybox-static)" >&2; exit 3
fi
# ldd says "statically linked" (exit 0) of a static-pie program, "not a dynamic executable" (exit 1) of others.
dynamic() { ldd "$1" >/dev/null 2>&1 && ! ldd "$1" 2>&1 | grep -q 'statically linked'; }
if dynamic "$busybox"; then
  echo "image/build.sh: $busybox is dynamically linked; install busybox-static" >&2; exit 3
fi
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)

if [ "$kind" = wmrender ] && [ -z "$binary" ]; then
  # Paths that would otherwise end up in the binary (panic locations): the checkout's and cargo's home.
  cargo_home=${CARGO_HOME:-$HOME/.cargo}
  (cd "$root" && RUSTFLAGS="--remap-path-prefix=$root=/wmrender --remap-path-prefix=$cargo_home=/cargo" \
    CARGO_PROFILE_RELEASE_DEBUG=0 cargo build --locked --release --target x86_64-unknown-linux-musl --bin wmrender \
    --target-dir "$root/target/image" >&2)
  binary=$root/target/image/x86_64-unknown-linux-musl/release/wmrender
fi
if [ -n "$binary" ] && dynamic "$binary"; then
  echo "image/build.sh: $binary is dynamically linked; it would not start in an image with no C library" >&2; exit 3
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fs=$work/rootfs
mkdir -p "$fs/bin" "$fs/etc" "$fs/tmp"
install -m 0755 "$busybox" "$fs/bin/busybox"
if [ "$kind" = wmrender ]; then
  mkdir -p "$fs/usr/local/bin"
  install -m 0755 "$binary" "$fs/usr/local/bin/wmrender"
  tools=(sh grep head cat)
  tag=$version
  entrypoint='["/usr/local/bin/wmrender","krm"]'
else
  mkdir -p "$fs/payload"
  cp -R "$payload/." "$fs/payload/"
  # Programs stay executable, everything is readable by the init container's user.
  find "$fs/payload" -type d -exec chmod 0755 {} +
  find "$fs/payload" -type f -exec chmod 0644 {} +
  find "$fs/payload" -type f \( -name '*.exe' -o -name '*.dll' \) -exec chmod 0755 {} +
  tools=(sh cp)
  tag=payload
  entrypoint='["/bin/cp"]'
fi
for t in "${tools[@]}"; do ln -s busybox "$fs/bin/$t"; done
printf 'root:x:0:0:root:/:/bin/sh\nargocd:x:999:0:argocd:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > "$fs/etc/passwd"
printf 'root:x:0:\nargocd:x:999:\nnobody:x:65534:\n' > "$fs/etc/group"
chmod 0644 "$fs/etc/passwd" "$fs/etc/group"
chmod 0755 "$fs" "$fs/bin" "$fs/etc"
[ -d "$fs/usr" ] && chmod 0755 "$fs/usr" "$fs/usr/local" "$fs/usr/local/bin"
chmod 1777 "$fs/tmp"

# One layer: sorted, every time SOURCE_DATE_EPOCH, owners 0:0, no atime/ctime, names without "./".
tar --sort=name --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$fs" -cf "$work/layer.tar" \
  $(cd "$fs" && ls -A | sort)
gzip -n -9 -c "$work/layer.tar" > "$work/layer.tar.gz"

blobs=$work/out/blobs/sha256
mkdir -p "$blobs"
put() { # FILE -> prints "sha256:<hex> <size>", the file stored as a blob
  local hex size
  hex=$(sha256sum "$1" | cut -d' ' -f1); size=$(stat -c %s "$1")
  cp "$1" "$blobs/$hex"; echo "sha256:$hex $size"
}
diff_id=sha256:$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
read -r layer layer_size < <(put "$work/layer.tar.gz")
printf '{"architecture":"amd64","config":{"Entrypoint":%s,"Env":["PATH=/usr/local/bin:/bin"],"Labels":{"org.opencontainers.image.revision":"%s","org.opencontainers.image.version":"%s"},"User":"999:0","WorkingDir":"/tmp"},"created":"%s","history":[{"created":"%s","created_by":"image/build.sh %s"}],"os":"linux","rootfs":{"diff_ids":["%s"],"type":"layers"}}' \
  "$entrypoint" "$revision" "$version" "$created" "$created" "$kind" "$diff_id" > "$work/config.json"
read -r config config_size < <(put "$work/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s}]}' \
  "$config" "$config_size" "$layer" "$layer_size" > "$work/manifest.json"
read -r manifest manifest_size < <(put "$work/manifest.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$manifest_size" "$tag" > "$work/out/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$work/out/oci-layout"

# Replace OUT only once everything is written.
rm -rf "$out.tmp"
mv "$work/out" "$out.tmp"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$manifest"

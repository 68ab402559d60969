#!/usr/bin/env bash
# End-to-end proof of the rendered hosts.toml with the real consumer: a private containerd pulls through three
# TLS registries on 127.0.0.1 (a source and two mirrors) using the directory wmrender renders, and the registries'
# access logs show who was asked. Needs root, and: containerd docker-registry skopeo umoci openssl curl (apt).
#
# The throwaway CA reaches ctr through SSL_CERT_FILE, which Go's TLS stack reads instead of the system store: the
# rendered https:// URLs are used unchanged and the machine's trust store is never touched.
#
# Usage: bash tests/e2e/mirrors.sh [path/to/wmrender]
#   E2E_PORT_BASE: first of three loopback ports (default 5101); E2E_KEEP=1 keeps the work directory for debugging.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WMRENDER=${1:-$ROOT/target/debug/wmrender}
BASE=${E2E_PORT_BASE:-5101}
SRC=127.0.0.1:$BASE M1=127.0.0.1:$((BASE + 1)) M2=127.0.0.1:$((BASE + 2))

W=$(mktemp -d /tmp/wmrender-mirrors-e2e.XXXXXX)
declare -A PID=()
CTD_PID=
cleanup() {
  for p in "${PID[@]}" $CTD_PID; do kill "$p" 2>/dev/null || true; done
  for p in "${PID[@]}" $CTD_PID; do wait "$p" 2>/dev/null || true; done
  if [ -n "${E2E_KEEP:-}" ]; then echo "kept $W" >&2; return; fi
  # containerd's native snapshots may hold read-only files; make them removable.
  chmod -R u+w "$W" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT

passed=0 failed=0
pass() { echo "ok   - $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - $1"; shift; for l in "$@"; do echo "       $l"; done; failed=$((failed + 1)); }

wait_for() { # bounded readiness loop: 200 x 50 ms
  for _ in $(seq 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "timed out waiting for: $*" >&2; return 1
}

# --- a throwaway CA and a certificate for 127.0.0.1 ----------------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=wmrender e2e CA" \
  -keyout "$W/ca.key" -out "$W/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$W/reg.key" -out "$W/reg.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$W/san.ext"
openssl x509 -req -in "$W/reg.csr" -CA "$W/ca.pem" -CAkey "$W/ca.key" -CAcreateserial -days 1 \
  -extfile "$W/san.ext" -out "$W/reg.pem" 2>/dev/null
export SSL_CERT_FILE=$W/ca.pem

# --- three registries ---------------------------------------------------------------------------------------------
start_registry() { # name addr
  local name=$1 addr=$2 dir=$W/reg-$1
  mkdir -p "$dir/data"
  cat > "$dir/config.yml" <<YML
version: 0.1
log: {level: warn, accesslog: {disabled: false}}
storage: {filesystem: {rootdirectory: $dir/data}, delete: {enabled: true}}
http: {addr: $addr, tls: {certificate: $W/reg.pem, key: $W/reg.key}}
YML
  docker-registry serve "$dir/config.yml" >>"$dir/log" 2>&1 &
  PID[$name]=$!
  wait_for curl -sf --cacert "$W/ca.pem" "https://$addr/v2/"
}
stop_registry() { kill "${PID[$1]}"; wait "${PID[$1]}" 2>/dev/null || true; unset "PID[$1]"; }
log_mark() { wc -l < "$W/reg-$1/log"; }                  # lines so far
log_since() { tail -n +"$(($2 + 1))" "$W/reg-$1/log"; }    # lines after a mark

start_registry src "$SRC"; start_registry m1 "$M1"; start_registry m2 "$M2"

# --- one tiny image, pushed to the source and to both mirrors under their prefixes -------------------------------
umoci init --layout "$W/oci" && umoci new --image "$W/oci:tiny"
umoci unpack --rootless --image "$W/oci:tiny" "$W/bundle" >/dev/null
echo hello > "$W/bundle/rootfs/hello.txt"
umoci repack --image "$W/oci:tiny" "$W/bundle" >/dev/null
for dest in "$SRC/library/tiny:1" "$M1/m1/library/tiny:1" "$M2/m2/library/tiny:1"; do
  skopeo copy --quiet --dest-cert-dir "$W/certs-none" --dest-tls-verify=false "oci:$W/oci:tiny" "docker://$dest"
done

# --- a private containerd ------------------------------------------------------------------------------------------
mkdir -p "$W/ctd"
cat > "$W/ctd/config.toml" <<TOML
version = 2
root = "$W/ctd/root"
state = "$W/ctd/state"
[grpc]
  address = "$W/ctd/containerd.sock"
[ttrpc]
  address = "$W/ctd/containerd.sock.ttrpc"
TOML
containerd --config "$W/ctd/config.toml" >"$W/ctd/log" 2>&1 &
CTD_PID=$!
CTR=(ctr --address "$W/ctd/containerd.sock")
wait_for "${CTR[@]}" version

# --- render the hosts directory from inputs ------------------------------------------------------------------------
render() { # name, mirrors block (YAML under spec.mirrors)
  local dir=$W/case-$1
  mkdir -p "$dir"
  cat > "$dir/wmrender.yaml" <<YML
apiVersion: wmrender.dev/v1alpha1
kind: ClusterInputs
metadata: {name: e2e}
spec:
  infrastructureID: e2e-00000
  apiServerInternalURL: https://api-int.e2e.example.com:6443
  platform: {none: {}}
  byoh: [{address: 10.0.0.5, username: Administrator}]
  network: {hybridClusterNetwork: [10.132.0.0/14]}
  mirrors:
$2
YML
  "$WMRENDER" render --strict -f "$dir/wmrender.yaml" -o "$dir/out" --only node 2>"$dir/render.log" \
    || { cat "$dir/render.log"; return 1; }
  HOSTS=$dir/out/node/C/k/containerd/registries
  test -f "$HOSTS/127.0.0.1_${BASE}_/hosts.toml"
}

N=0
pull() { # image → 0 if pulled; each pull in a fresh namespace so nothing is served from a previous pull
  N=$((N + 1))
  "${CTR[@]}" -n "pull$N" images pull --snapshotter native --hosts-dir "$HOSTS" "$1" >"$W/pull$N.log" 2>&1
}
asked() { # registry mark path-pattern: did the registry get a request for it after the mark?
  log_since "$1" "$2" | grep -Eq "\"(GET|HEAD) /v2/$3"
}

IMAGE=$SRC/library/tiny:1
TAGGED='(m1/|m2/)?library/tiny/manifests/1[ ?]'

render allow "    imageTagMirrors:
    - source: $SRC/library/tiny
      mirrors: [$M1/m1/library/tiny, $M2/m2/library/tiny]"

# 1. Priority: with both mirrors up only the first listed mirror is asked.
s=$(log_mark src) a=$(log_mark m1) b=$(log_mark m2)
if pull "$IMAGE" && asked m1 "$a" "m1/library/tiny/manifests/1[ ?]" && ! asked m2 "$b" "" && ! asked src "$s" ""; then
  pass "AllowContactingSource: the image comes from the first mirror, no other registry is asked"
else
  fail "first mirror" "$(cat "$W/pull$N.log")" "m2: $(log_since m2 "$b" | head -3)" "src: $(log_since src "$s" | head -3)"
fi

# 2. First mirror down: the second serves.
stop_registry m1
s=$(log_mark src) b=$(log_mark m2)
if pull "$IMAGE" && asked m2 "$b" "m2/library/tiny/manifests/1[ ?]" && ! asked src "$s" ""; then
  pass "AllowContactingSource: with the first mirror stopped the image comes from the second"
else
  fail "second mirror" "$(cat "$W/pull$N.log")"
fi

# 3. Both mirrors down: the source serves.
stop_registry m2
s=$(log_mark src)
if pull "$IMAGE" && asked src "$s" "library/tiny/manifests/1[ ?]"; then
  pass "AllowContactingSource: with both mirrors stopped the image comes from the source"
else
  fail "source fallback" "$(cat "$W/pull$N.log")"
fi

# 4. NeverContactSource: mirrors down, the pull fails and the source hears nothing.
render never "    imageTagMirrors:
    - source: $SRC/library/tiny
      mirrors: [$M1/m1/library/tiny, $M2/m2/library/tiny]
      mirrorSourcePolicy: NeverContactSource"
s=$(log_mark src)
if ! pull "$IMAGE" && ! asked src "$s" ""; then
  pass "NeverContactSource: with the mirrors stopped the pull fails and the source receives no request"
else
  fail "never contact source" "$(cat "$W/pull$N.log")" "src: $(log_since src "$s" | head -3)"
fi

start_registry m1 "$M1"; start_registry m2 "$M2"

# 5. Priority is the list order, not the alphabet (WMCO sorts mirrors): listed second-first, m2 is asked first.
render reversed "    imageTagMirrors:
    - source: $SRC/library/tiny
      mirrors: [$M2/m2/library/tiny, $M1/m1/library/tiny]"
a=$(log_mark m1) b=$(log_mark m2)
if pull "$IMAGE" && asked m2 "$b" "m2/library/tiny/manifests/1[ ?]" && ! asked m1 "$a" ""; then
  pass "priority follows the listed order: the mirror listed first is asked, whatever its name"
else
  fail "listed order" "$(cat "$W/pull$N.log")" "m1: $(log_since m1 "$a" | head -3)"
fi

# 6. A digest-only (IDMS) mirror is never asked to resolve a tag; the tag mirror (ITMS) resolves it.
cat > "$W/case-idms.yaml" <<YML
apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata: {name: digest-only}
spec:
  imageDigestMirrors:
  - source: $SRC/library/tiny
    mirrors: [$M1/m1/library/tiny]
YML
mkdir -p "$W/case-digest"; cp "$W/case-idms.yaml" "$W/case-digest/idms.yaml"
render digest "    files: [idms.yaml]
    imageTagMirrors:
    - source: $SRC/library/tiny
      mirrors: [$M2/m2/library/tiny]"
s=$(log_mark src) a=$(log_mark m1) b=$(log_mark m2)
if pull "$IMAGE" && ! asked m1 "$a" "$TAGGED" && asked m2 "$b" "m2/library/tiny/manifests/1[ ?]" && ! asked src "$s" ""; then
  pass "IDMS mirror: never asked to resolve a tag; the ITMS mirror resolves it"
else
  fail "digest-only mirror" "$(cat "$W/pull$N.log")" "m1: $(log_since m1 "$a" | head -5)"
fi

# 7. Requests to mirrors carry containerd's ns= parameter: they really went through the hosts.toml mirror path.
if grep -q "ns=127.0.0.1%3A$BASE" "$W/reg-m2/log"; then
  pass "mirror requests carry ?ns=$SRC (containerd's mirror marker)"
else
  fail "ns parameter" "$(head -3 "$W/reg-m2/log")"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# The container image test: builds the image from the root Dockerfile, as users do, but from
# local bases (deploy/image/local-bases.sh: debootstrap and this machine's Rust toolchain,
# since base images cannot be pulled here), runs it with buildah and sends MCP traffic
# through it to the legacy fixture server (tests/peers/legacy_server.py over Streamable HTTP).
#
# Checks: hadolint finds nothing; the image runs as 65532:65532 with `eragate` as entrypoint
# and no shell; `eragate health` (the image's HEALTHCHECK) passes inside the container;
# a legacy client and a 2026-07-28 client both call tools through it.
#
# Runs as root (buildah, debootstrap; installed from apt when missing). Idempotent: buildah's
# storage (bases and layer cache) is kept in .cache/container/storage, so a second run only
# rebuilds what changed, and not even that when nothing did. Uses the peers of tests/peers/install.sh (ERAGATE_PEERS, else
# .cache/peers). Prints the image size and how long the build took. ERAGATE_IMAGE_PROFILE picks
# the Cargo profile (the Dockerfile's PROFILE: dist, the default, or release).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v buildah >/dev/null || need_apt+=(buildah)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
if ((${#need_apt[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
# shellcheck source=tests/deploy/tools.sh
source tests/deploy/tools.sh

image=localhost/eragate:test
export ERAGATE_BUILDAH_ROOT=$PWD/.cache/container/storage
buildah=(buildah --storage-driver vfs --root "$ERAGATE_BUILDAH_ROOT/root" --runroot "$ERAGATE_BUILDAH_ROOT/runroot")

"$deploy_tools/bin/hadolint" --failure-threshold info Dockerfile
echo "hadolint: Dockerfile clean"

deploy/image/local-bases.sh

# What the build reads: the Dockerfile, the context it keeps (.dockerignore) and both bases.
# An image recorded with the same digest is that build's result: reuse it (even a fully
# cached `buildah bud` takes minutes on vfs, which copies the builder's tree per step).
profile=${ERAGATE_IMAGE_PROFILE:-dist}
inputs=$({
  echo "PROFILE=$profile"
  sha256sum Dockerfile .dockerignore
  find Cargo.toml Cargo.lock src benches bench/Cargo.toml bench/src -type f -print0 | sort -z | xargs -0 sha256sum
  for base in localhost/eragate-builder:bookworm localhost/eragate-runtime:bookworm; do
    "${buildah[@]}" inspect --type image --format '{{.FromImageID}}' "$base"
  done
} | sha256sum | cut -d' ' -f1)
log=.cache/container/build.log
stamp=.cache/container/image.inputs
start=$SECONDS
image_id() { "${buildah[@]}" images --no-trunc --format '{{.ID}}' "$image" 2>/dev/null; }
if [[ -f $stamp ]] && [[ $(cat "$stamp") == "$inputs $(image_id)" ]]; then
  echo "kept $image: nothing it is built from changed"
else
  rm -f "$stamp"
  "${buildah[@]}" bud --isolation chroot --layers --format docker \
    --build-arg BUILDER=localhost/eragate-builder:bookworm \
    --build-arg RUNTIME=localhost/eragate-runtime:bookworm \
    --build-arg PROFILE="$profile" \
    -t "$image" . >"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }
  echo "$inputs $(image_id)" >"$stamp"
  echo "built $image in $((SECONDS - start)) s (log: $log)"
fi
# Each changed build leaves its layers (vfs copies whole trees): bound the cache at 20 GB.
if (($(du -sk "$ERAGATE_BUILDAH_ROOT" | cut -f1) > 20 * 1024 * 1024)); then
  "${buildah[@]}" rmi --prune >/dev/null 2>&1 || true
fi
size=$("${buildah[@]}" images --format '{{.Size}}' "$image")
echo "image size: $size"

fail() { echo "container.sh: $*" >&2; exit 1; }
inspect() { "${buildah[@]}" inspect --type image --format "$1" "$image"; }
[[ $(inspect '{{.Docker.Config.User}}') == 65532:65532 ]] || fail "image user is not 65532:65532"
[[ $(inspect '{{.Docker.Config.Entrypoint}}') == '[/usr/local/bin/eragate]' ]] || fail "entrypoint is not eragate"
[[ $(inspect '{{.Docker.Config.Healthcheck.Test}}') == '[CMD /usr/local/bin/eragate health http://127.0.0.1:8080/healthz]' ]] \
  || fail "the HEALTHCHECK is not eragate health"


# The peers: the Python SDK (for the fixture server and the client).
peers=${ERAGATE_PEERS:-$PWD/.cache/peers}
[[ -f $peers/env.sh ]] || tests/peers/install.sh
# shellcheck source=/dev/null
source "$peers/env.sh"

run=$(mktemp -d)
ctr=
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  [[ -n $ctr ]] && "${buildah[@]}" rm "$ctr" >/dev/null 2>&1
  rm -rf "$run"
}
trap cleanup EXIT

# The legacy server, on the host's loopback.
"$PEERS_PYTHON" tests/peers/legacy_server.py http --port 0 >"$run/upstream.out" 2>"$run/upstream.err" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$run/upstream.out" && break; sleep 0.1; done
upstream=$("$PEERS_PYTHON" -c 'import json,sys; print(json.loads(sys.stdin.readline())["listening"])' <"$run/upstream.out") \
  || fail "the legacy server did not start: $(cat "$run/upstream.err")"

# eragate in the container: chroot isolation shares the host's network, so 127.0.0.1 works.
port=$("$PEERS_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$run/etc"
cat >"$run/etc/eragate.toml" <<TOML
[listen]
address = "127.0.0.1:$port"

[[upstreams]]
name = "legacy"
path = "/mcp"

[upstreams.http]
url = "$upstream"
TOML
chmod -R a+rX "$run"
ctr=$("${buildah[@]}" from "$image")
if "${buildah[@]}" run --isolation chroot "$ctr" -- /bin/sh -c true >/dev/null 2>&1; then
  fail "the image has a shell"
fi
"${buildah[@]}" run --isolation chroot --volume "$run/etc:/etc/eragate:ro" "$ctr" -- \
  /usr/local/bin/eragate run --config /etc/eragate/eragate.toml >"$run/eragate.out" 2>"$run/eragate.err" &
pids+=($!)

health() { "${buildah[@]}" run --isolation chroot "$ctr" -- /usr/local/bin/eragate health "http://127.0.0.1:$port/$1"; }
ok=0
for _ in $(seq 100); do
  if health readyz >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.2
done
((ok)) || fail "eragate in the container never became ready: $(cat "$run/eragate.err")"
health healthz
health readyz

uid=$(awk '/^Uid:/ { print $2 }' "/proc/$(pgrep -f "^/usr/local/bin/eragate run --config /etc/eragate/eragate.toml" | head -n 1)/status")
[[ $uid == 65532 ]] || fail "eragate runs as uid $uid, not 65532"
echo "eragate runs in the container as uid $uid"

url=http://127.0.0.1:$port/mcp
for mode in legacy 2026-07-28; do
  report=$("$PEERS_PYTHON" tests/peers/py_client.py --mode "$mode" --url "$url" --scenario tools --timeout 20) \
    || fail "the $mode client failed through the container: $(tail -n 20 "$run/eragate.err")"
  "$PEERS_PYTHON" - "$mode" "$report" <<'PY'
import json, sys
mode, report = sys.argv[1], json.loads(sys.argv[2])
echo = report["results"]["call_echo"]["text"]
add = report["results"]["call_add"]
assert echo == "echo: hi", (mode, report)
print(f"{mode} client through the container: protocol {report['protocol_version']}, echo -> {echo!r}, add -> {add}")
PY
done
echo "container test passed"

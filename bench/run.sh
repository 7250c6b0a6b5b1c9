#!/usr/bin/env bash
# eragate's benchmark, in one command:
#
#   bench/run.sh [--quick] [--no-build]
#
# Builds eragate and the hyper relay with the `dist` profile the container image ships (fat
# LTO, one codegen unit) and the rest of the harness in release mode, installs the peer
# bridges (supergateway@4.0.0 from npm, mcp-proxy==0.13.0 from PyPI) into .cache/bench/,
# starts every process on 127.0.0.1, runs every scenario of issue 3, stops everything it
# started, counts instructions and system calls per call of nginx, the relay and eragate
# (bench/floor.sh; full runs only, installing valgrind and strace when missing), and writes
# bench/RESULTS.md. Full run: about 15 minutes on 2 cores, 2 of them counting; --quick: under 3.
# Scratch files and logs go to bench/work/ (ignored by git).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
MODE=full
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --quick) MODE=quick ;;
    # The binaries already in target/dist and target/release (no build, no criterion micro benchmarks):
    # a check of the harness on a machine where a build would take long.
    --no-build) BUILD=0 ;;
    *) echo "usage: bench/run.sh [--quick] [--no-build]" >&2; exit 2 ;;
  esac
done

START_S=$(date +%s)
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
WORK="$REPO/bench/work"
CACHE="$REPO/.cache/bench"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
BIN="$TARGET_DIR/release"
# The two proxies compared with nginx, built as eragate ships (Cargo.toml's `dist` profile).
ERAGATE="$TARGET_DIR/dist/eragate"
RELAY="$TARGET_DIR/dist/hyper-relay"
RUN_ID="eragate-bench-$$-$START_S"
export ERAGATE_BENCH_RUN="$RUN_ID"   # inherited by what we start: the final sweep finds strays by it
export ERAGATE_LOG="${ERAGATE_LOG:-warn}"

log() { printf '[bench %3ss] %s\n' "$(( $(date +%s) - START_S ))" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- timing per mode
if [[ $MODE == quick ]]; then
  ROUNDS=2; ROUNDS_MAIN=2; WARM=200; DUR=500
  SESSIONS=2000; INFLIGHT=250; SLEEP_MS=1000
  CRIT=(--warm-up-time 0.3 --measurement-time 0.6 --sample-size 20)
else
  ROUNDS=3; ROUNDS_MAIN=5; WARM=500; DUR=2000
  SESSIONS=10000; INFLIGHT=1000; SLEEP_MS=1500
  CRIT=(--warm-up-time 1 --measurement-time 2)
fi
CONC="1,16,64"

# ---------------------------------------------------------------- CPU pinning
CORES=$(nproc)
if (( CORES >= 2 )); then
  LOAD_CPUS=0; SERVER_CPUS="1-$((CORES - 1))"
  PIN_LOAD=(taskset -c "$LOAD_CPUS"); PIN_SERVER=(taskset -c "$SERVER_CPUS"); SERVER_CORES=$((CORES - 1))
  PINNING="load generator on CPU $LOAD_CPUS; every server (fast upstream, eragate, supergateway, mcp-proxy and their children) on CPU(s) $SERVER_CPUS"
else
  PIN_LOAD=(); PIN_SERVER=(); SERVER_CORES=1
  PINNING="none (1 CPU)"
fi

# ---------------------------------------------------------------- process bookkeeping
# shellcheck source=bench/procs.sh
source "$HERE/procs.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- ports
# Twelve consecutive free ports: from ERAGATE_BENCH_PORT_BASE (default 18701), else the next free block.
BASE="${ERAGATE_BENCH_PORT_BASE:-18701}"
for attempt in $(seq 50); do
  all_free=1
  for p in $(seq "$BASE" $((BASE + 11))); do port_free "$p" || { all_free=0; break; }; done
  (( all_free )) && break
  (( attempt == 50 )) && die "no twelve free ports from ${ERAGATE_BENCH_PORT_BASE:-18701} on"
  BASE=$((BASE + 12))
done
P_UP=$BASE; P_GW=$((BASE + 1)); P_GW_STDIO=$((BASE + 2)); P_SUPERGW=$((BASE + 3)); P_MCPPROXY=$((BASE + 4)); P_GW_MEM=$((BASE + 5))
P_EVERY=$((BASE + 6)); P_GW_EVERY=$((BASE + 7)); P_ISSUER=$((BASE + 8)); P_GW_OAUTH=$((BASE + 9))
P_NGINX=$((BASE + 10)); P_RELAY=$((BASE + 11))

# This run's own scratch only: the folders other scripts keep under bench/work/
# (instructions/, floor/, scale/, soak/, ab/, telemetry/) keep their outputs.
mkdir -p "$WORK"
find "$WORK" -maxdepth 1 -type f -delete
rm -rf "$WORK/logs" "$WORK/nginx"
mkdir -p "$WORK/logs" "$CACHE"

# ---------------------------------------------------------------- build
if ((BUILD)); then
  log "building (dist: eragate and hyper-relay; release: the harness)"
  # The same command and linker option as the Dockerfile's (see there, and bench/NOTES.md,
  # "A linker option"): the memory scenario measures what the image ships.
  DIST_LINK=(-C link-arg=-Wl,-z,pack-relative-relocs)
  (cd "$REPO" && cargo rustc --profile dist -p eragate --bin eragate --quiet -- "${DIST_LINK[@]}" \
    && cargo rustc --profile dist -p eragate-bench --bin hyper-relay --quiet -- "${DIST_LINK[@]}" \
    && cargo build --release --workspace --bins --quiet && cargo bench --no-run --quiet --bench micro 2>/dev/null)
fi
for b in "$ERAGATE" "$RELAY" "$BIN/fast-upstream" "$BIN/mcpload" "$BIN/bench-issuer"; do [[ -x "$b" ]] || die "$b missing"; done
# What was built: the commit, and whether src/ differed from it.
COMMIT="$(cd "$REPO" && git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(cd "$REPO" && git status --porcelain -- src 2>/dev/null)" ]]; then COMMIT="$COMMIT + uncommitted changes in src/"; fi

# ---------------------------------------------------------------- peers
SUPERGW_VERSION=4.0.0
MCPPROXY_VERSION=0.13.0
EVERYTHING_VERSION=2026.8.31
PEERS="$CACHE/peers"
SUPERGW_JS="$PEERS/npm/node_modules/supergateway/dist/index.js"
MCPPROXY="$PEERS/venv/bin/mcp-proxy"
EVERYTHING_JS="$PEERS/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
STAMP_WANT="supergateway@$SUPERGW_VERSION server-everything@$EVERYTHING_VERSION mcp-proxy==$MCPPROXY_VERSION python=$(python3 -c 'import sys; print(sys.version.split()[0])') node=$(node --version)"
if [[ ! -f "$PEERS/.installed" || "$(cat "$PEERS/.installed")" != "$STAMP_WANT" ]]; then
  log "installing peers into $PEERS"
  rm -rf "$PEERS"; mkdir -p "$PEERS/npm"
  npm install --prefix "$PEERS/npm" --no-audit --no-fund --loglevel=error "supergateway@$SUPERGW_VERSION" \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" > "$WORK/logs/npm-install.log" 2>&1 \
    || die "npm install failed; see $WORK/logs/npm-install.log"
  python3 -m venv "$PEERS/venv"
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check "mcp-proxy==$MCPPROXY_VERSION" > "$WORK/logs/pip-install.log" 2>&1 \
    || die "pip install failed; see $WORK/logs/pip-install.log"
  echo "$STAMP_WANT" > "$PEERS/.installed"
fi
[[ -f "$SUPERGW_JS" && -f "$EVERYTHING_JS" && -x "$MCPPROXY" ]] || die "peers missing in $PEERS"
# Debian's packages, installed when missing: `from_debian NAME PACKAGE [FALLBACK]`. The install
# never starts a service (policy-rc.d); run.sh starts its own nginx on loopback.
from_debian() {
  local name="$1" package="$2" fallback="${3:-$2}" failed=0
  log "installing $package from Debian's packages (apt)"
  command -v apt-get >/dev/null || die "$name is missing and there is no apt-get: install $package"
  local sudo=(); (( EUID == 0 )) || sudo=(sudo)
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null && "${sudo[@]}" chmod +x "$policy" && own_policy=1
  fi
  apt_one() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$1"; }
  { apt_one "$package" || { "${sudo[@]}" apt-get update -q && apt_one "$package"; } || apt_one "$fallback"; } \
    > "$WORK/logs/apt-$name.log" 2>&1 || failed=1
  (( own_policy )) && "${sudo[@]}" rm -f "$policy"
  (( failed == 0 )) || die "apt-get install $package failed; see $WORK/logs/apt-$name.log"
}
# nginx, the floor (issue 17).
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
if [[ ! -x $NGINX ]]; then
  from_debian nginx nginx-light nginx
  NGINX=/usr/sbin/nginx
fi
# valgrind and strace for the counted section (bench/floor.sh), full runs only.
if [[ $MODE == full ]]; then
  command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || from_debian valgrind valgrind
  command -v strace >/dev/null || from_debian strace strace
fi
NGINX_FOUND=$("$NGINX" -v 2>&1 | sed 's/^nginx version: //')
# matplotlib (PyPI) for the charts, in a venv of its own.
CHARTS_VENV="$CACHE/charts-venv"
MATPLOTLIB_VERSION=3.10.7
if [[ "$(cat "$CHARTS_VENV/.installed" 2>/dev/null)" != "matplotlib==$MATPLOTLIB_VERSION" ]]; then
  log "installing matplotlib==$MATPLOTLIB_VERSION into $CHARTS_VENV"
  rm -rf "$CHARTS_VENV"; python3 -m venv "$CHARTS_VENV"
  "$CHARTS_VENV/bin/pip" install --quiet --disable-pip-version-check "matplotlib==$MATPLOTLIB_VERSION" > "$WORK/logs/pip-matplotlib.log" 2>&1 \
    || die "pip install matplotlib failed; see $WORK/logs/pip-matplotlib.log"
  echo "matplotlib==$MATPLOTLIB_VERSION" > "$CHARTS_VENV/.installed"
fi
BUILT_S=$(( $(date +%s) - START_S ))
SUPERGW_FOUND=$(node -p "require('$PEERS/npm/node_modules/supergateway/package.json').version")
EVERYTHING_FOUND=$(node -p "require('$PEERS/npm/node_modules/@modelcontextprotocol/server-everything/package.json').version")
MCPPROXY_FOUND=$("$PEERS/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp-proxy"), "(mcp", m.version("mcp") + ")")')
BIND_LOCALHOST="$REPO/tests/peers/bind-localhost.cjs"
[[ -f $BIND_LOCALHOST ]] || die "$BIND_LOCALHOST missing"

# ---------------------------------------------------------------- 5. micro benchmarks (nothing else running)
if ((BUILD)); then
  log "micro benchmarks (criterion)"
  rm -rf "$TARGET_DIR/criterion"
  (cd "$REPO" && "${PIN_SERVER[@]}" cargo bench --quiet --bench micro -- "${CRIT[@]}" --noplot) > "$WORK/micro.log" 2>&1 \
    || { tail -20 "$WORK/micro.log" >&2; die "micro benchmarks failed"; }
fi

# ---------------------------------------------------------------- configs
CFG_HTTP="$WORK/eragate-http.toml"
cat > "$CFG_HTTP" <<EOF
# eragate in front of the fast upstream over Streamable HTTP (scenarios 1, 2, 4)
[listen]
address = "127.0.0.1:$P_GW"

[sessions]
max_sessions = 20000          # room for the 10,000 idle sessions of scenario 4
max_sessions_per_principal = 20000  # ... all of one (anonymous) principal

[[upstreams]]
name = "fast"
max_in_flight = 4096          # room for the 1,000 requests in flight of scenario 4
[upstreams.http]
url = "http://127.0.0.1:$P_UP/mcp"
[upstreams.pool]
max_children_per_principal = 20000  # each legacy session holds an upstream session: at the default 16 the rest were ended
EOF
sed "s/127.0.0.1:$P_GW\"/127.0.0.1:$P_GW_MEM\"/" "$CFG_HTTP" > "$WORK/eragate-memory.toml"

CFG_STDIO="$WORK/eragate-stdio.toml"
cat > "$CFG_STDIO" <<EOF
# eragate in front of the fast upstream over stdio (scenario 3): 2026-07-28
# clients share one pooled child; each legacy client session gets a child of
# its own, taken from warm spares.
[listen]
address = "127.0.0.1:$P_GW_STDIO"

[[upstreams]]
name = "fast-stdio"
[upstreams.stdio]
command = ["$BIN/fast-upstream", "--stdio"]
spares = 4
max_children = 96             # 64 legacy sessions at concurrency 64, the pooled child, spares
EOF

CFG_OAUTH="$WORK/eragate-oauth.toml"
cat > "$CFG_OAUTH" <<EOF
# eragate in front of the fast upstream over Streamable HTTP with OAuth on (scenario 6):
# every request carries an EdDSA JWT from bench-issuer, checked against its JWKS.
[listen]
address = "127.0.0.1:$P_GW_OAUTH"

[auth.oauth]
issuer = "http://127.0.0.1:$P_ISSUER"
scopes_supported = ["mcp:tools"]
required_scopes = ["mcp:tools"]

[[upstreams]]
name = "fast"
[upstreams.http]
url = "http://127.0.0.1:$P_UP/mcp"
EOF

CFG_EVERY="$WORK/eragate-everything.toml"
cat > "$CFG_EVERY" <<EOF
# eragate in front of server-everything (a TypeScript SDK server) over Streamable HTTP
# (scenario 2c): an upstream whose handshake costs what a real SDK server's costs.
[listen]
address = "127.0.0.1:$P_GW_EVERY"

[[upstreams]]
name = "everything"
[upstreams.http]
url = "http://127.0.0.1:$P_EVERY/mcp"
EOF

# nginx in front of the fast upstream: loopback only, an HTTP/1.1 keep-alive upstream,
# no access log, as many workers as eragate has threads (one per server core).
NGINX_DIR="$WORK/nginx"; mkdir -p "$NGINX_DIR/tmp"
CFG_NGINX="$NGINX_DIR/nginx.conf"
cat > "$CFG_NGINX" <<EOF
# nginx in front of the fast upstream (the floor of scenarios 1 and 2): loopback only,
# keep-alive upstream, no access log, one worker per server core (eragate's threads).
daemon off;
master_process on;
worker_processes $SERVER_CORES;
pid $NGINX_DIR/nginx.pid;
error_log $WORK/logs/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $NGINX_DIR/tmp/body;
  proxy_temp_path $NGINX_DIR/tmp/proxy;
  fastcgi_temp_path $NGINX_DIR/tmp/fastcgi;
  uwsgi_temp_path $NGINX_DIR/tmp/uwsgi;
  scgi_temp_path $NGINX_DIR/tmp/scgi;
  keepalive_requests 1000000;
  upstream fast {
    server 127.0.0.1:$P_UP;
    keepalive 256;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$P_NGINX;
    location / {
      proxy_pass http://fast;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
# The pids of nginx's master and workers, joined by + (mcpload sums their CPU).
nginx_pids() { echo "$1$(ps -o pid= --ppid "$1" | tr -d ' ' | sed 's/^/+/' | tr -d '\n')"; }

compare() { # NAME TITLE SUBJECT ROUNDS [--sse] TARGET...
  local name="$1" title="$2" subject="$3" rounds="$4"; shift 4
  local args=()
  if [[ ${1:-} == --sse ]]; then args+=(--sse); shift; fi
  for t in "$@"; do args+=(--target "$t"); done
  log "scenario $name: $title"
  "${PIN_LOAD[@]}" "$BIN/mcpload" compare --name "$name" --title "$title" --subject "$subject" \
    --concurrency "$CONC" --rounds "$rounds" --warmup-ms "$WARM" --duration-ms "$DUR" \
    --out "$WORK/$name.json" "${args[@]}" 2> >(tee -a "$WORK/logs/mcpload.log" >&2)
}

# ---------------------------------------------------------------- 1 and 2: HTTP upstream
log "starting the fast upstream (HTTP) and eragate"
start upstream "${PIN_SERVER[@]}" "$BIN/fast-upstream" --http "127.0.0.1:$P_UP"; UP_PID=$LAST_PID
wait_mcp "http://127.0.0.1:$P_UP/mcp" "$UP_PID" legacy
start eragate-http "${PIN_SERVER[@]}" "$ERAGATE" run --config "$CFG_HTTP" --shutdown-grace 2s; GW_PID=$LAST_PID
wait_http "http://127.0.0.1:$P_GW/readyz" "$GW_PID"
wait_mcp "http://127.0.0.1:$P_GW/mcp" "$GW_PID" modern

start nginx "${PIN_SERVER[@]}" "$NGINX" -c "$CFG_NGINX" -p "$NGINX_DIR" -e "$WORK/logs/nginx-error.log"; NGINX_PID=$LAST_PID
wait_mcp "http://127.0.0.1:$P_NGINX/mcp" "$NGINX_PID" legacy
NGINX_PIDS=$(nginx_pids "$NGINX_PID")
# The floor of eragate's own design: the same runtime and HTTP parts, forwarding only.
start hyper-relay "${PIN_SERVER[@]}" "$RELAY" "127.0.0.1:$P_RELAY" "http://127.0.0.1:$P_UP"; RELAY_PID=$LAST_PID
wait_mcp "http://127.0.0.1:$P_RELAY/mcp" "$RELAY_PID" legacy

DIRECT="http://127.0.0.1:$P_UP/mcp"
VIA="http://127.0.0.1:$P_GW/mcp"
VIA_NGINX="http://127.0.0.1:$P_NGINX/mcp"
# Every target also reports the upstream's CPU per request (upstream=): direct, behind eragate, behind nginx.
NGINX_T="name=nginx,pattern=legacy,url=$VIA_NGINX,pid=$NGINX_PIDS,upstream=$UP_PID"
RELAY_T="name=hyper-relay,pattern=legacy,url=http://127.0.0.1:$P_RELAY/mcp,pid=$RELAY_PID,upstream=$UP_PID"
compare s1-json "passthrough, JSON" eragate "$ROUNDS_MAIN" \
  "name=direct,pattern=legacy,url=$DIRECT,pid=$UP_PID,upstream=$UP_PID" \
  "name=eragate,pattern=legacy,url=$VIA,pid=$GW_PID,upstream=$UP_PID" "$NGINX_T" "$RELAY_T"
compare s1-sse "passthrough, SSE" eragate "$ROUNDS" --sse \
  "name=direct,pattern=legacy,url=$DIRECT,pid=$UP_PID,upstream=$UP_PID" \
  "name=eragate,pattern=legacy,url=$VIA,pid=$GW_PID,upstream=$UP_PID" "$NGINX_T"
compare s2-json "era translation, JSON" eragate-modern "$ROUNDS" \
  "name=eragate-modern,pattern=modern,url=$VIA,pid=$GW_PID,upstream=$UP_PID" \
  "name=established-session,pattern=legacy,url=$DIRECT,pid=$UP_PID,upstream=$UP_PID" \
  "name=per-request-handshake,pattern=handshake,url=$DIRECT,pid=$UP_PID,upstream=$UP_PID" "$NGINX_T" "$RELAY_T"
compare s2-sse "era translation, SSE" eragate-modern "$ROUNDS" --sse \
  "name=eragate-modern,pattern=modern,url=$VIA,pid=$GW_PID,upstream=$UP_PID" \
  "name=established-session,pattern=legacy,url=$DIRECT,pid=$UP_PID,upstream=$UP_PID" "$NGINX_T"
stop "$NGINX_PID"; stop "$RELAY_PID"

# ---------------------------------------------------------------- 6: OAuth on the request path
log "starting bench-issuer and eragate with OAuth"
start issuer "${PIN_SERVER[@]}" "$BIN/bench-issuer" "127.0.0.1:$P_ISSUER"; ISS_PID=$LAST_PID
wait_http "http://127.0.0.1:$P_ISSUER/jwks" "$ISS_PID"
start eragate-oauth "${PIN_SERVER[@]}" "$ERAGATE" run --config "$CFG_OAUTH" --shutdown-grace 2s; GWA_PID=$LAST_PID
wait_http "http://127.0.0.1:$P_GW_OAUTH/readyz" "$GWA_PID"
VIA_OAUTH="http://127.0.0.1:$P_GW_OAUTH/mcp"
TOKEN_FILE="$WORK/bench-token.jwt"
curl -fsS -o "$TOKEN_FILE" "http://127.0.0.1:$P_ISSUER/token?aud=$VIA_OAUTH&scope=mcp:tools" || die "no token from bench-issuer"
wait_mcp "$VIA_OAUTH" "$GWA_PID" modern "--token-file $TOKEN_FILE"
compare s6-oauth-modern "OAuth on, 2026-07-28 client" eragate-oauth "$ROUNDS" \
  "name=eragate-oauth,pattern=modern,url=$VIA_OAUTH,pid=$GWA_PID,token_file=$TOKEN_FILE" \
  "name=eragate,pattern=modern,url=$VIA,pid=$GW_PID"
compare s6-oauth-legacy "OAuth on, legacy client" eragate-oauth "$ROUNDS" \
  "name=eragate-oauth,pattern=legacy,url=$VIA_OAUTH,pid=$GWA_PID,token_file=$TOKEN_FILE" \
  "name=eragate,pattern=legacy,url=$VIA,pid=$GW_PID"
stop "$GWA_PID"
stop "$ISS_PID"
stop "$GW_PID"

# ---------------------------------------------------------------- 2c: era translation, a real SDK upstream
log "starting server-everything (Streamable HTTP) and eragate in front of it"
PORT=$P_EVERY start everything "${PIN_SERVER[@]}" node --require "$BIND_LOCALHOST" "$EVERYTHING_JS" streamableHttp; EV_PID=$LAST_PID
wait_mcp "http://127.0.0.1:$P_EVERY/mcp" "$EV_PID" legacy "--arg message"
start eragate-everything "${PIN_SERVER[@]}" "$ERAGATE" run --config "$CFG_EVERY" --shutdown-grace 2s; GWE_PID=$LAST_PID
wait_http "http://127.0.0.1:$P_GW_EVERY/readyz" "$GWE_PID"
wait_mcp "http://127.0.0.1:$P_GW_EVERY/mcp" "$GWE_PID" modern "--arg message"
EV_DIRECT="http://127.0.0.1:$P_EVERY/mcp"
compare s2e-json "era translation, server-everything, JSON" eragate-modern "$ROUNDS" \
  "name=eragate-modern,pattern=modern,url=http://127.0.0.1:$P_GW_EVERY/mcp,pid=$GWE_PID,arg=message" \
  "name=established-session,pattern=legacy,url=$EV_DIRECT,pid=$EV_PID,arg=message" \
  "name=per-request-handshake,pattern=handshake,url=$EV_DIRECT,pid=$EV_PID,arg=message"
stop "$GWE_PID"
stop "$EV_PID"

# ---------------------------------------------------------------- 4: memory (a fresh eragate)
log "scenario memory: idle, $SESSIONS idle legacy sessions, $INFLIGHT in flight"
start eragate-memory "${PIN_SERVER[@]}" "$ERAGATE" run --config "$WORK/eragate-memory.toml" --shutdown-grace 2s; MEM_PID=$LAST_PID
wait_http "http://127.0.0.1:$P_GW_MEM/readyz" "$MEM_PID"
"${PIN_LOAD[@]}" "$BIN/mcpload" memory --url "http://127.0.0.1:$P_GW_MEM/mcp" --pid "$MEM_PID" \
  --sessions "$SESSIONS" --inflight "$INFLIGHT" --sleep-ms "$SLEEP_MS" --out "$WORK/memory.json" \
  2> >(tee -a "$WORK/logs/mcpload.log" >&2)
stop "$MEM_PID"
stop "$UP_PID"

# ---------------------------------------------------------------- 3: stdio bridging
log "starting eragate, supergateway and mcp-proxy in front of fast-upstream --stdio"
start eragate-stdio "${PIN_SERVER[@]}" "$ERAGATE" run --config "$CFG_STDIO" --shutdown-grace 2s; GWS_PID=$LAST_PID
start supergateway "${PIN_SERVER[@]}" node --require "$BIND_LOCALHOST" "$SUPERGW_JS" \
  --stdio "$BIN/fast-upstream --stdio" --outputTransport streamableHttp --stateful \
  --port "$P_SUPERGW" --streamableHttpPath /mcp --logLevel none; SG_PID=$LAST_PID
start mcp-proxy "${PIN_SERVER[@]}" "$MCPPROXY" --host 127.0.0.1 --port "$P_MCPPROXY" --log-level WARNING \
  -- "$BIN/fast-upstream" --stdio; MP_PID=$LAST_PID
wait_http "http://127.0.0.1:$P_GW_STDIO/readyz" "$GWS_PID"
wait_mcp "http://127.0.0.1:$P_GW_STDIO/mcp" "$GWS_PID" legacy
wait_mcp "http://127.0.0.1:$P_SUPERGW/mcp" "$SG_PID" legacy
wait_mcp "http://127.0.0.1:$P_MCPPROXY/mcp" "$MP_PID" legacy
compare s3-stdio "stdio bridging" eragate "$ROUNDS" \
  "name=eragate,pattern=legacy,url=http://127.0.0.1:$P_GW_STDIO/mcp,pid=$GWS_PID" \
  "name=supergateway,pattern=legacy,url=http://127.0.0.1:$P_SUPERGW/mcp,pid=$SG_PID" \
  "name=mcp-proxy,pattern=legacy,url=http://127.0.0.1:$P_MCPPROXY/mcp,pid=$MP_PID" \
  "name=eragate-modern,pattern=modern,url=http://127.0.0.1:$P_GW_STDIO/mcp,pid=$GWS_PID"
cleanup
log "every process stopped"

# ---------------------------------------------------------------- counted (full runs)
# Instructions per call, by group of functions, and system calls, of nginx, the relay and
# eragate (bench/floor.sh, on the release builds): counts that do not move with the host,
# beside the timings above that do.
COUNTED="$WORK/counted.md"
rm -f "$COUNTED"
if [[ $MODE == full ]]; then
  log "counting instructions and system calls per call (bench/floor.sh)"
  "$HERE/floor.sh" --no-build --seconds 10 > "$COUNTED" 2> "$WORK/logs/floor.log" \
    || die "bench/floor.sh failed; see $WORK/logs/floor.log"
fi

# ---------------------------------------------------------------- report
ENV_FILE="$WORK/env.txt"
{
  echo "mode=$MODE"
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "elapsed_s=$(( $(date +%s) - START_S ))"
  echo "setup_s=$BUILT_S"
  echo "loadavg_start=$LOADAVG_START"
  echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cores=$CORES"
  echo "memory=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel=$(uname -sr)"
  echo "commit=$COMMIT"
  echo "rustc=$(rustc --version)"
  echo "build=eragate and hyper-relay: dist profile (opt-level 3, fat LTO, one codegen unit, line tables), as the container image ships; the harness: release"
  echo "supergateway=$SUPERGW_FOUND (npm), stateful Streamable HTTP mode"
  echo "everything=@modelcontextprotocol/server-everything $EVERYTHING_FOUND (npm), streamableHttp mode"
  echo "mcp_proxy=$MCPPROXY_FOUND (PyPI)"
  echo "nginx=$NGINX_FOUND (Debian package), $SERVER_CORES worker(s), keep-alive upstream, access log off"
  echo "node=$(node --version)"
  echo "python=$("$PEERS/venv/bin/python" --version 2>&1)"
  echo "pinning=$PINNING (taskset)"
  echo "server_cores=$SERVER_CORES"
  echo "setup=All processes on 127.0.0.1, HTTP/1.1 keep-alive. The load generator (\`mcpload\`, one thread) on its own core so that it does not compete with what it measures; the servers share the other core(s), so eragate competes with the upstream it fronts, as a sidecar would. The fast upstream (\`fast-upstream\`, Rust, hyper, one thread) is the same binary for every scenario but 2c (server-everything), over HTTP or stdio. eragate runs with \`ERAGATE_LOG=$ERAGATE_LOG\`; its configuration files are below. Timing: warm-up $WARM ms, measured $DUR ms per run; $ROUNDS_MAIN rounds for scenario 1a, $ROUNDS for the others.\\n"
  echo "configs=$CFG_HTTP $CFG_STDIO $CFG_EVERY $CFG_OAUTH $CFG_NGINX"
  echo "repo=$REPO"
  if [[ -f $COUNTED ]]; then echo "counted_file=$COUNTED"; fi
} > "$ENV_FILE"
"$CHARTS_VENV/bin/python" "$HERE/charts.py" "$WORK" "$HERE/charts" || die "charts.py failed"
"$BIN/mcpload" report --work "$WORK" --env "$ENV_FILE" --criterion "$TARGET_DIR/criterion" --out "$HERE/RESULTS.md"
log "wrote bench/RESULTS.md ($MODE run, $(( $(date +%s) - START_S )) s)"

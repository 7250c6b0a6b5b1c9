#!/usr/bin/env bash
# Where the distance to nginx lies (issue 17), counted rather than timed:
#
#   bench/floor.sh [--seconds N] [--no-build]
#
# Three proxies in front of the same fast upstream: nginx (the floor the issue names),
# `hyper-relay` (bench/src/bin/hyper_relay.rs: eragate's own runtime and HTTP parts,
# forwarding only) and eragate. It prints four tables (markdown), which bench/run.sh puts
# into RESULTS.md and bench/NOTES.md quotes:
#
#   1. instructions each proxy executes per legacy `tools/call` (callgrind, one client);
#      eragate also with a 2026-07-28 client;
#   2. where the relay's and eragate's go, by group of functions (bench/cost_groups.py on
#      the profiles of table 1): what eragate adds to the relay, group by group;
#   3. instructions the upstream executes per request behind the relay and behind
#      eragate (callgrind on the upstream, 16 clients): does eragate make it work harder?
#   4. system calls per request of each proxy at 1 and 16 clients (strace -c -f).
#
# Counts do not depend on what else runs on the machine, so this runs on a busy one.
# Needs valgrind, strace and nginx (bench/run.sh installs nginx). Scratch: bench/work/floor/.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_PER_CASE=10
BUILD=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_PER_CASE="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    *) echo "usage: bench/floor.sh [--seconds N] [--no-build]" >&2; exit 2 ;;
  esac
done
for tool in valgrind callgrind_control strace; do
  command -v "$tool" >/dev/null || { echo "floor.sh: $tool is needed (apt-get install valgrind strace)" >&2; exit 1; }
done
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
[[ -x $NGINX ]] || { echo "floor.sh: nginx is needed (bench/run.sh installs it)" >&2; exit 1; }

WORK="$REPO/bench/work/floor"
rm -rf "$WORK"; mkdir -p "$WORK/nginx/tmp"
if ((BUILD)); then
  (cd "$REPO" && cargo build --release --quiet --locked --bin eragate -p eragate \
    && cargo build --release --quiet --locked -p eragate-bench)
fi
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release"
# bench/run.sh's pinning: the load generator on CPU 0, every server on the others, so that
# each proxy runs one worker thread as it does there.
PIN_LOAD=(); PIN_SERVER=()
if (( $(nproc) >= 2 )); then PIN_LOAD=(taskset -c 0); PIN_SERVER=(taskset -c "1-$(($(nproc) - 1))"); fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
until_ok() { local i; for i in $(seq 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done; return 1; }
probe() { until_ok "$BIN/mcpload" probe --url "$1" --pattern "${2:-legacy}" || { echo "floor.sh: nothing answers at $1" >&2; exit 1; }; }
ops_of() { python3 -c 'import json,sys; print(sum(x["ops"] for x in json.load(open(sys.argv[1]))["runs"]))' "$1"; }
load() { # NAME URL PATTERN CONCURRENCY MILLISECONDS: closed-loop calls (two interleaved targets, one endpoint)
  local t="pattern=$3,url=$2"
  "${PIN_LOAD[@]}" "$BIN/mcpload" compare --name "$1" --title "$1" --subject a --target "name=a,$t" --target "name=b,$t" \
    --concurrency "$4" --rounds 1 --warmup-ms 0 --duration-ms "$5" --out "$WORK/$1.json" >/dev/null 2>&1
}

nginx_conf() { # PORT UPSTREAM_PORT: as bench/run.sh's, but one process (master_process off), so valgrind sees the worker
  cat <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/tmp/body; proxy_temp_path $WORK/nginx/tmp/proxy;
  fastcgi_temp_path $WORK/nginx/tmp/fastcgi; uwsgi_temp_path $WORK/nginx/tmp/uwsgi; scgi_temp_path $WORK/nginx/tmp/scgi;
  keepalive_requests 1000000;
  upstream fast { server 127.0.0.1:$2; keepalive 256; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$1;
    location / { proxy_pass http://fast; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
EOF
}
eragate_conf() { # PORT UPSTREAM_PORT
  printf '[listen]\naddress = "127.0.0.1:%s"\n[[upstreams]]\nname = "fast"\n[upstreams.http]\nurl = "http://127.0.0.1:%s/mcp"\n' "$1" "$2"
}
start_proxy() { # KIND PORT UPSTREAM_PORT [WRAPPER...]: starts it, sets PROXY_PID
  local kind="$1" port="$2" up="$3"; shift 3
  set -- "${PIN_SERVER[@]}" "$@"
  case "$kind" in
    nginx) nginx_conf "$port" "$up" > "$WORK/nginx/nginx.conf"
      "$@" "$NGINX" -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" > "$WORK/$kind.log" 2>&1 & ;;
    relay) "$@" "$BIN/hyper-relay" "127.0.0.1:$port" "http://127.0.0.1:$up" > "$WORK/$kind.log" 2>&1 & ;;
    eragate) eragate_conf "$port" "$up" > "$WORK/eragate-$port.toml"
      "$@" "$BIN/eragate" run --config "$WORK/eragate-$port.toml" > "$WORK/$kind.log" 2>&1 & ;;
  esac
  PROXY_PID=$!; PIDS+=("$PROXY_PID")
}

P_UP=$(free_port)
"${PIN_SERVER[@]}" "$BIN/fast-upstream" --http "127.0.0.1:$P_UP" > "$WORK/upstream.log" 2>&1 & PIDS+=($!)
probe "http://127.0.0.1:$P_UP/mcp"

# ---------------------------------------------------------------- 1. instructions per call
echo "| proxy, client (calls measured) | instructions per call |"
echo "|---|---:|"
GROUPED=()
for case in nginx:legacy relay:legacy eragate:legacy eragate:modern; do
  kind="${case%%:*}"; pattern="${case#*:}"; port=$(free_port)
  start_proxy "$kind" "$port" "$P_UP" valgrind --tool=callgrind --callgrind-out-file="$WORK/$kind-$pattern.%p.out"
  url="http://127.0.0.1:$port/mcp"; probe "$url" "$pattern"
  load "$kind-$pattern-warm" "$url" "$pattern" 1 3000
  callgrind_control -z "$PROXY_PID" >/dev/null
  load "$kind-$pattern" "$url" "$pattern" 1 "$((SECONDS_PER_CASE * 1000))"
  callgrind_control -d "$PROXY_PID" >/dev/null
  kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true
  ops=$(ops_of "$WORK/$kind-$pattern.json")
  # The dump taken after zeroing (the highest-numbered part) holds the measured window.
  instructions=$(for f in "$WORK/$kind-$pattern".*.out.*; do grep -h '^summary:' "$f" | awk '{print $2}'; done | sort -n | tail -1)
  echo "| $kind, $pattern ($ops) | $((instructions / ops)) |"
  profile=$(grep -l "^summary: $instructions\$" "$WORK/$kind-$pattern".*.out.* | head -1)
  case "$kind:$pattern" in
    relay:legacy) GROUPED+=("relay=$profile:$ops") ;;
    eragate:legacy) GROUPED+=("eragate, legacy=$profile:$ops") ;;
    eragate:modern) GROUPED+=("eragate, 2026-07-28=$profile:$ops") ;;
  esac
done
echo

# ---------------------------------------------------------------- 2. by group of functions
python3 "$REPO/bench/cost_groups.py" "${GROUPED[@]}"
echo

# ---------------------------------------------------------------- 3. the upstream's instructions per request
echo "| the upstream, behind (requests) | its instructions per request |"
echo "|---|---:|"
for kind in relay eragate; do
  up=$(free_port); port=$(free_port)
  # The whole run of a fresh upstream under callgrind, written when it exits (TERM):
  # its start and the proxy's handshake are a few thousand requests' worth at most.
  "${PIN_SERVER[@]}" valgrind --tool=callgrind --callgrind-out-file="$WORK/upstream-behind-$kind.out" \
    "$BIN/fast-upstream" --http "127.0.0.1:$up" > "$WORK/upstream-$kind.log" 2>&1 &
  up_pid=$!; PIDS+=("$up_pid")
  probe "http://127.0.0.1:$up/mcp"
  start_proxy "$kind" "$port" "$up"
  probe "http://127.0.0.1:$port/mcp"
  load "upstream-behind-$kind" "http://127.0.0.1:$port/mcp" legacy 16 "$((SECONDS_PER_CASE * 1000))"
  kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true
  kill -TERM "$up_pid"; wait "$up_pid" 2>/dev/null || true
  ops=$(ops_of "$WORK/upstream-behind-$kind.json")
  instructions=$(grep -h '^summary:' "$WORK/upstream-behind-$kind.out" | awk '{print $2}')
  echo "| $kind ($ops) | $((instructions / ops)) |"
done
echo

# ---------------------------------------------------------------- 4. system calls per request
echo "| proxy, clients | system calls per request (strace -c -f over a 1.2 s window) |"
echo "|---|---|"
for kind in nginx relay eragate; do
  port=$(free_port)
  start_proxy "$kind" "$port" "$P_UP"
  url="http://127.0.0.1:$port/mcp"; probe "$url"
  for c in 1 16; do
    load "sys-$kind-$c-warm" "$url" legacy "$c" 1000
    timeout 4 strace -f -c -p "$PROXY_PID" -o "$WORK/sys-$kind-$c.txt" 2>/dev/null & st=$!
    sleep 0.5
    load "sys-$kind-$c" "$url" legacy "$c" 1200
    wait "$st" || true
    ops=$(ops_of "$WORK/sys-$kind-$c.json")
    calls=$(awk -v ops="$ops" 'NR > 2 && $4 ~ /^[0-9]+$/ && $NF != "total" && $4 / ops >= 0.01 { printf "%s%s %.2f", sep, $NF, $4 / ops; sep = ", " }' "$WORK/sys-$kind-$c.txt")
    echo "| $kind, c$c | $calls |"
  done
  kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true
done

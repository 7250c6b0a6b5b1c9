#!/usr/bin/env bash
# eragate's scale curves (issue 17) and the list cache's hit path (issue 16):
#
#   bench/scale.sh [--quick] [--no-build]
#
# Against a release build of eragate in front of the fast bench upstream, measures
#   - RSS and CPU with 1 k, 10 k and 100 k idle legacy sessions;
#   - 1 k and 10 k open SSE streams: legacy GET streams, and 2026-07-28 `subscriptions/listen`;
#   - 1 k concurrent 2026-07-28 calls over a stdio pool of 1, 4 and 16 children;
#   - a cached 2026-07-28 `tools/list` against a proxied `tools/call` (CPU per request);
# fits the constant per unit, writes bench/SCALE.md and the chart bench/charts/scale.png,
# and splices the section into bench/RESULTS.md (`mcpload report` keeps it there).
# Full run: about 6 minutes on 2 cores; --quick (smaller sizes, shorter windows): about 2.
# Scratch files and logs go to bench/work/scale/ (ignored by git).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
MODE=full
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --quick) MODE=quick ;;
    --no-build) BUILD=0 ;; # the release binaries already in target/release
    *) echo "usage: bench/scale.sh [--quick] [--no-build]" >&2; exit 2 ;;
  esac
done

START_S=$(date +%s)
LOADAVG_START=$(cut -d' ' -f1-3 /proc/loadavg)
WORK="$REPO/bench/work/scale"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
BIN="$TARGET_DIR/release"
RUN_ID="eragate-scale-$$-$START_S"
export ERAGATE_BENCH_RUN="$RUN_ID"   # inherited by what we start: the final sweep finds strays by it
export ERAGATE_LOG="${ERAGATE_LOG:-warn}"

log() { printf '[scale %3ss] %s\n' "$(( $(date +%s) - START_S ))" "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ $MODE == quick ]]; then
  IDLE_STEPS=1000,5000; STREAM_STEPS=500,2000; IDLE_S=3
  POOL_C=200; ROUNDS=1; WARM=500; DUR=1000; LIST_C=1,16
else
  # 100 k idle sessions is the goal; the default stops at 30 k, a smaller run (eragate holds
  # about 780 MiB at 100 k). ERAGATE_SCALE_IDLE_STEPS=1000,10000,100000 asks for it, as SCALE.md's run did.
  IDLE_STEPS=${ERAGATE_SCALE_IDLE_STEPS:-1000,10000,30000}; STREAM_STEPS=1000,10000; IDLE_S=5
  POOL_C=1000; ROUNDS=3; WARM=1000; DUR=2000; LIST_C=1,16,64
fi
MAX_STREAMS=${STREAM_STEPS##*,}

# Open files: each open stream is a connection on both sides (mcpload and eragate).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
(( NOFILE >= MAX_STREAMS + 2000 )) || die "the open-file limit is $NOFILE; $MAX_STREAMS streams need $((MAX_STREAMS + 2000)) (raise the hard limit)"

CORES=$(nproc)
if (( CORES >= 2 )); then
  PIN_LOAD=(taskset -c 0); PIN_SERVER=(taskset -c "1-$((CORES - 1))")
  PINNING="load generator on CPU 0; eragate, the upstream and its children on CPU(s) 1-$((CORES - 1))"
else
  PIN_LOAD=(); PIN_SERVER=(); PINNING="none (1 CPU)"
fi

# shellcheck source=bench/procs.sh
source "$HERE/procs.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# Nine consecutive free ports from ERAGATE_BENCH_PORT_BASE (default 18801).
BASE="${ERAGATE_BENCH_PORT_BASE:-18801}"
for attempt in $(seq 50); do
  all_free=1
  for p in $(seq "$BASE" $((BASE + 8))); do port_free "$p" || { all_free=0; break; }; done
  (( all_free )) && break
  (( attempt == 50 )) && die "no nine free ports from ${ERAGATE_BENCH_PORT_BASE:-18801} on"
  BASE=$((BASE + 9))
done
P_UP=$BASE; P_IDLE=$((BASE + 1)); P_GET=$((BASE + 2)); P_LISTEN=$((BASE + 3)); P_LIST=$((BASE + 4))
P_POOL1=$((BASE + 5)); P_POOL4=$((BASE + 6)); P_POOL16=$((BASE + 7)); P_ADMIN=$((BASE + 8))

rm -rf "$WORK"
mkdir -p "$WORK/logs"

if ((BUILD)); then
  log "building (release)"
  # One invocation for both packages: the same feature set as run.sh (a build of eragate alone rebuilds its dependencies).
  (cd "$REPO" && cargo build --release --locked --quiet --workspace --bins)
fi
for b in eragate fast-upstream mcpload; do [[ -x "$BIN/$b" ]] || die "$BIN/$b missing"; done
COMMIT="$(cd "$REPO" && git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(cd "$REPO" && git status --porcelain -- src 2>/dev/null)" ]]; then COMMIT="$COMMIT + uncommitted changes in src/"; fi
# matplotlib (PyPI) for the chart, in the venv run.sh uses (made here when missing).
CHARTS_VENV="$REPO/.cache/bench/charts-venv"
MATPLOTLIB_VERSION=3.10.7
if [[ "$(cat "$CHARTS_VENV/.installed" 2>/dev/null)" != "matplotlib==$MATPLOTLIB_VERSION" ]]; then
  log "installing matplotlib==$MATPLOTLIB_VERSION into $CHARTS_VENV"
  rm -rf "$CHARTS_VENV"; python3 -m venv "$CHARTS_VENV"
  "$CHARTS_VENV/bin/pip" install --quiet --disable-pip-version-check "matplotlib==$MATPLOTLIB_VERSION" > "$WORK/logs/pip-matplotlib.log" 2>&1 \
    || die "pip install matplotlib failed; see $WORK/logs/pip-matplotlib.log"
  echo "matplotlib==$MATPLOTLIB_VERSION" > "$CHARTS_VENV/.installed"
fi

# ---------------------------------------------------------------- configs
# Bounds raised so that nothing is evicted or refused at the sizes measured:
# sessions (and the dedicated upstream session each legacy client holds), connections,
# listens. Every other key at its default.
http_config() { # PORT NAME [EXTRA TOML FOR THE UPSTREAM]
  cat <<EOF
[listen]
address = "127.0.0.1:$1"
max_connections = $((MAX_STREAMS * 2 + 1000))

[limits]
max_connections_per_ip = $((MAX_STREAMS * 2 + 1000))
max_listens = $((MAX_STREAMS * 2))
max_listens_per_principal = $((MAX_STREAMS * 2))

[sessions]
max_sessions = 250000
max_sessions_per_principal = 250000

[[upstreams]]
name = "$2"
max_in_flight = 4096
[upstreams.http]
url = "http://127.0.0.1:$P_UP/mcp"
[upstreams.pool]
max_children_per_principal = 250000
${3:-}
EOF
}
stdio_config() { # PORT POOL_SIZE
  cat <<EOF
[listen]
address = "127.0.0.1:$1"

[limits]
max_connections_per_ip = $((POOL_C * 2 + 1000))

[[upstreams]]
name = "fast-stdio"
max_in_flight = 4096          # every one of the $POOL_C concurrent calls in flight
[upstreams.stdio]
command = ["$BIN/fast-upstream", "--stdio"]
max_children = $(($2 + 4))
[upstreams.pool]
size = $2
queue = 4096
EOF
}
http_config "$P_IDLE" fast > "$WORK/eragate-idle.toml"
http_config "$P_GET" fast > "$WORK/eragate-get.toml"
http_config "$P_LISTEN" fast > "$WORK/eragate-listen.toml"
http_config "$P_LIST" fast $'[upstreams.cache]\nrelist_interval = "60s"   # the fast upstream cannot announce list changes: keep its lists 60 s' \
  > "$WORK/eragate-list.toml"
printf '\n[admin]\naddress = "127.0.0.1:%s"   # /metrics: the list cache hits and misses\n' "$P_ADMIN" >> "$WORK/eragate-list.toml"
for n in 1 4 16; do stdio_config "$(eval echo "\$P_POOL$n")" "$n" > "$WORK/eragate-pool$n.toml"; done
for f in "$WORK"/eragate-*.toml; do
  "$BIN/eragate" check-config "$f" > "$WORK/logs/check-$(basename "$f").log" 2>&1 \
    || { cat "$WORK/logs/check-$(basename "$f").log" >&2; die "check-config refused $f"; }
done

LOADGEN=("${PIN_LOAD[@]}" "$BIN/mcpload")
gateway() { # NAME PORT: starts eragate with $WORK/eragate-NAME.toml; sets GW_PID
  start "eragate-$1" "${PIN_SERVER[@]}" "$BIN/eragate" run --config "$WORK/eragate-$1.toml" --shutdown-grace 2s; GW_PID=$LAST_PID
  wait_http "http://127.0.0.1:$2/readyz" "$GW_PID"
}

log "starting the fast upstream (HTTP)"
start upstream "${PIN_SERVER[@]}" "$BIN/fast-upstream" --http "127.0.0.1:$P_UP"; UP_PID=$LAST_PID
wait_mcp "http://127.0.0.1:$P_UP/mcp" "$UP_PID" legacy

# ---------------------------------------------------------------- idle legacy sessions
log "idle legacy sessions: $IDLE_STEPS"
gateway idle "$P_IDLE"
"${LOADGEN[@]}" scale --url "http://127.0.0.1:$P_IDLE/mcp" --pid "$GW_PID" --unit session --steps "$IDLE_STEPS" \
  --idle-s "$IDLE_S" --out "$WORK/idle.json" 2> >(tee -a "$WORK/logs/mcpload.log" >&2)
stop "$GW_PID"

# ---------------------------------------------------------------- open SSE streams
log "legacy GET streams: $STREAM_STEPS"
gateway get "$P_GET"
"${LOADGEN[@]}" scale --url "http://127.0.0.1:$P_GET/mcp" --pid "$GW_PID" --unit get --steps "$STREAM_STEPS" \
  --idle-s "$IDLE_S" --out "$WORK/get.json" 2> >(tee -a "$WORK/logs/mcpload.log" >&2)
stop "$GW_PID"

log "subscriptions/listen streams: $STREAM_STEPS"
gateway listen "$P_LISTEN"
wait_mcp "http://127.0.0.1:$P_LISTEN/mcp" "$GW_PID" modern
"${LOADGEN[@]}" scale --url "http://127.0.0.1:$P_LISTEN/mcp" --pid "$GW_PID" --unit listen --steps "$STREAM_STEPS" \
  --idle-s "$IDLE_S" --out "$WORK/listen.json" 2> >(tee -a "$WORK/logs/mcpload.log" >&2)
stop "$GW_PID"

# ---------------------------------------------------------------- the list cache's hit path
log "cached tools/list against a proxied tools/call"
gateway list "$P_LIST"; LIST_PID=$GW_PID
wait_mcp "http://127.0.0.1:$P_LIST/mcp" "$LIST_PID" modern
"${LOADGEN[@]}" compare --name list --title "cached tools/list vs tools/call" --subject cached-list \
  --concurrency "$LIST_C" --rounds "$ROUNDS" --warmup-ms "$WARM" --duration-ms "$DUR" --out "$WORK/list.json" \
  --target "name=cached-list,pattern=list,url=http://127.0.0.1:$P_LIST/mcp,pid=$LIST_PID,upstream=$UP_PID" \
  --target "name=call,pattern=modern,url=http://127.0.0.1:$P_LIST/mcp,pid=$LIST_PID,upstream=$UP_PID" \
  2> >(tee -a "$WORK/logs/mcpload.log" >&2)
HITS=$(curl -fsS "http://127.0.0.1:$P_ADMIN/metrics" 2>/dev/null | grep -E '^eragate_list_cache_(hits|misses)_total' | tr '\n' ' ' || true)
log "list cache: ${HITS:-no /metrics figures}"
stop "$LIST_PID"
stop "$UP_PID"

# ---------------------------------------------------------------- a stdio pool under 1 k concurrent calls
log "stdio pools of 1, 4 and 16 children, $POOL_C concurrent calls"
POOL_TARGETS=(); POOL_PIDS=()
for n in 1 4 16; do
  port=$(eval echo "\$P_POOL$n")
  gateway "pool$n" "$port"
  wait_mcp "http://127.0.0.1:$port/mcp" "$GW_PID" modern
  POOL_PIDS+=("$GW_PID")
  POOL_TARGETS+=(--target "name=pool-$n,pattern=modern,url=http://127.0.0.1:$port/mcp,pid=$GW_PID,upstream_children=$GW_PID")
done
"${LOADGEN[@]}" compare --name pool --title "stdio pool of 1, 4, 16 children" --subject pool-1 \
  --concurrency "$POOL_C" --rounds "$ROUNDS" --warmup-ms "$WARM" --duration-ms "$DUR" --out "$WORK/pool.json" \
  "${POOL_TARGETS[@]}" 2> >(tee -a "$WORK/logs/mcpload.log" >&2)
POOL_CHILDREN=""
for i in 0 1 2; do
  n=$(( 4 ** i )); pid=${POOL_PIDS[i]}
  POOL_CHILDREN+="${POOL_CHILDREN:+, }$n: $(ps -o pid= --ppid "$pid" | wc -l)"
done
log "live children per pool size: $POOL_CHILDREN"
cleanup
log "every process stopped"

# ---------------------------------------------------------------- report
LOADAVG_END=$(cut -d' ' -f1-3 /proc/loadavg)
# Shared: the 1-minute load average at either end above the cores this run keeps busy (about 1.5 of 2).
SHARED=$(awk -v a="${LOADAVG_START%% *}" -v b="${LOADAVG_END%% *}" 'BEGIN { print ((a > 1.6 || b > 1.6) ? "yes" : "no") }')
ENV_FILE="$WORK/env.txt"
{
  echo "mode=$MODE"
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "elapsed_s=$(( $(date +%s) - START_S ))"
  echo "loadavg_start=$LOADAVG_START"
  echo "loadavg_end=$LOADAVG_END"
  echo "shared=${ERAGATE_BENCH_SHARED:-$SHARED}"
  echo "cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cores=$CORES"
  echo "memory=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel=$(uname -sr)"
  echo "commit=$COMMIT"
  echo "pinning=$PINNING (taskset)"
  echo "nofile=$NOFILE"
  echo "pool_children=$POOL_CHILDREN"
} > "$ENV_FILE"
"$CHARTS_VENV/bin/python" "$HERE/charts.py" --scale "$WORK" "$HERE/charts" || die "charts.py failed"
echo "chart=yes" >> "$ENV_FILE"
"$BIN/mcpload" scale-report --work "$WORK" --env "$ENV_FILE" --out "$HERE/SCALE.md" --results "$HERE/RESULTS.md"
log "wrote bench/SCALE.md and its section in bench/RESULTS.md ($MODE run, $(( $(date +%s) - START_S )) s)"

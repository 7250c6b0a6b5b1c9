#!/usr/bin/env bash
# eragate's soak, in one command:
#
#   bench/soak.sh [--duration 600] [--rate 100] [--workers 4] [--kill-every 30] [--warmup 60] [--out FILE] [--debug] [--no-build] [--load-bin DIR]
#
# (--debug: debug builds, for a quick check of the script itself; figures of record are release.
#  --no-build: use the binaries already in target/, as they are;
#  --load-bin DIR: take fast-upstream and mcpload from DIR, e.g. target/debug: they only have to
#  keep up with --rate; eragate is what is measured.)
#
# Builds in release mode, starts on 127.0.0.1 a fast upstream over HTTP and an
# eragate in front of it and of `fast-upstream --stdio` children, then sends a
# steady rate of `tools/call`s for --duration seconds from four kinds of client:
# 2026-07-28 and legacy-session (2025-11-25), each to the stdio and to the HTTP
# upstream. Every --kill-every seconds one of eragate's children is killed with
# SIGKILL. Every answer is checked against its request (its id and a nonce the
# upstream echoes): lost, crossed and duplicated answers must be 0; calls that
# fail with an error (those in flight on a killed child) are counted apart.
# eragate's RSS is sampled every 5 s; its slope after the warm-up is reported.
# Writes bench/SOAK.md (or --out) and exits non-zero if anything was lost,
# crossed or duplicated. Everything runs under nice -n 10.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
DURATION=600 RATE=100 WORKERS=4 KILL_EVERY=30 WARMUP=60 OUT="$HERE/SOAK.md" PROFILE=release NO_BUILD=0 LOAD_BIN=
while (($#)); do
  case "$1" in
    --debug) PROFILE=debug; shift; continue ;;
    --no-build) NO_BUILD=1; shift; continue ;;
    --load-bin) LOAD_BIN="$2" ;;
    --duration) DURATION="$2" ;;
    --rate) RATE="$2" ;;
    --workers) WORKERS="$2" ;;
    --kill-every) KILL_EVERY="$2" ;;
    --warmup) WARMUP="$2" ;;
    --out) OUT="$2" ;;
    *) echo "usage: bench/soak.sh [--duration S] [--rate CALLS_PER_S] [--workers N] [--kill-every S] [--warmup S] [--out FILE] [--debug] [--no-build] [--load-bin DIR]" >&2; exit 2 ;;
  esac
  shift 2
done

START_S=$(date +%s)
WORK="$REPO/bench/work/soak"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
BIN="$TARGET_DIR/$PROFILE"
BUILD=(--release); [[ $PROFILE == debug ]] && BUILD=()
LOAD_BIN="${LOAD_BIN:-$BIN}"
MCPLOAD="$LOAD_BIN/mcpload"
RUN_ID="eragate-soak-$$-$START_S"
export ERAGATE_BENCH_RUN="$RUN_ID"
export ERAGATE_LOG="${ERAGATE_LOG:-warn}"
NICE=(nice -n 10)

log() { printf '[soak %4ss] %s\n' "$(( $(date +%s) - START_S ))" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=bench/procs.sh
source "$HERE/procs.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

BASE="${ERAGATE_SOAK_PORT_BASE:-18751}"
for attempt in $(seq 50); do
  port_free "$BASE" && port_free $((BASE + 1)) && break
  (( attempt == 50 )) && die "no two free ports from ${ERAGATE_SOAK_PORT_BASE:-18751} on"
  BASE=$((BASE + 2))
done
P_UP=$BASE; P_GW=$((BASE + 1))

rm -rf "$WORK"
mkdir -p "$WORK/logs"

if (( NO_BUILD )); then
  [[ -x $BIN/eragate ]] || die "--no-build: no $BIN/eragate"
  for bin in fast-upstream mcpload; do [[ -x $LOAD_BIN/$bin ]] || die "--no-build: no $LOAD_BIN/$bin"; done
  NO_BUILD_FLAG=" --no-build"; [[ $LOAD_BIN != "$BIN" ]] && NO_BUILD_FLAG+=" --load-bin ${LOAD_BIN#"$REPO"/}"
  BUILT="as found in $BIN (built $(date -u -r "$BIN/eragate" '+%Y-%m-%d %H:%M UTC'))"
else
  log "building ($PROFILE)"
  (cd "$REPO" && "${NICE[@]}" cargo build "${BUILD[@]}" --locked --quiet -p eragate --bin eragate \
    && "${NICE[@]}" cargo build "${BUILD[@]}" --locked --quiet -p eragate-bench --bin fast-upstream --bin mcpload)
  NO_BUILD_FLAG=""
  BUILT="built from the commit below"
fi

CFG="$WORK/eragate.toml"
cat > "$CFG" <<EOF
# The soak: one stdio upstream (a pooled child for 2026-07-28 clients, a child
# per legacy client session) and one Streamable HTTP upstream.
[listen]
address = "127.0.0.1:$P_GW"

[[upstreams]]
name = "stdio"
path = "/stdio"

[upstreams.stdio]
command = ["$LOAD_BIN/fast-upstream", "--stdio"]
spares = 2
max_children = 32

[[upstreams]]
name = "http"
path = "/http"

[upstreams.http]
url = "http://127.0.0.1:$P_UP/mcp"
EOF

log "starting fast-upstream (HTTP) and eragate"
start fast-upstream "${NICE[@]}" "$LOAD_BIN/fast-upstream" --http "127.0.0.1:$P_UP"; UP_PID=$LAST_PID
# Serving before eragate starts, so that eragate warms its session at once.
wait_mcp "http://127.0.0.1:$P_UP/mcp" "$UP_PID" legacy
start eragate "${NICE[@]}" "$BIN/eragate" run --config "$CFG" --shutdown-grace 2s; GW_PID=$LAST_PID
wait_http "http://127.0.0.1:$P_GW/readyz" "$GW_PID"
for path in stdio http; do
  for pattern in modern legacy; do wait_mcp "http://127.0.0.1:$P_GW/$path" "$GW_PID" "$pattern"; done
done

log "soaking: $DURATION s at $RATE calls/s, $WORKERS connections per client kind, a child killed every $KILL_EVERY s"
targets=()
for path in stdio http; do
  for pattern in modern legacy; do
    targets+=(--target "name=$path-$pattern,pattern=$pattern,url=http://127.0.0.1:$P_GW/$path")
  done
done
status=0
"${NICE[@]}" "$LOAD_BIN/mcpload" soak "${targets[@]}" --pid "$GW_PID" --rate "$RATE" --duration "$DURATION" \
  --workers "$WORKERS" --kill-every "$KILL_EVERY" --warmup "$WARMUP" --rss-every 5 \
  --out "$WORK/soak.json" --md "$WORK/soak.md" 2> >(tee "$WORK/logs/mcpload.log" >&2) || status=$?
builtin kill -0 "$GW_PID" 2>/dev/null || die "eragate exited during the soak; see $WORK/logs/eragate.log"
cleanup
log "every process stopped"

{
  echo "# eragate soak"
  echo
  echo "Written by \`bench/soak.sh${NO_BUILD_FLAG} --duration $DURATION --rate $RATE --workers $WORKERS --kill-every $KILL_EVERY --warmup $WARMUP\`"
  echo "on $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$REPO" rev-parse --short HEAD),"
  echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "## What ran"
  echo
  echo "- eragate ($PROFILE build, $BUILT; \`ERAGATE_LOG=$ERAGATE_LOG\`) with two upstreams: \`fast-upstream --stdio\`"
  echo "  children (\`spares = 2\`, \`max_children = 32\`) at \`/stdio\` and \`fast-upstream --http\` at \`/http\`."
  echo "- \`mcpload soak\`: four client kinds, $WORKERS keep-alive connections each: 2026-07-28 (every request"
  echo "  self-contained) and legacy 2025-11-25 (a session per connection, reopened when it ends), each to both"
  echo "  upstreams, together $RATE calls/s at a steady pace. Every call is a \`sleep\` of 0–19 ms carrying a fresh id"
  echo "  and nonce that the upstream echoes; one call in four asks for progress, so its answer is an SSE stream."
  echo "- every $KILL_EVERY s, \`kill -9\` of one of eragate's children (the pooled child or a legacy session's), in turn."
  echo "- eragate's RSS from \`/proc/PID/status\` every 5 s; everything under \`nice -n 10\`."
  echo
  echo "An answer is *ok* (one response, our id, our nonce), *failed with an error* (an HTTP error status or"
  echo "a JSON-RPC error: what a call in flight on a killed child, or a legacy session whose child died, gets),"
  echo "*crossed* (another id or another call's nonce), *duplicated* (a nonce answered before, or two responses"
  echo "in one answer) or *lost* (no answer in 30 s, or the connection closed without one)."
  echo "Lost, crossed and duplicated must be 0."
  echo
  echo "## Figures"
  echo
  cat "$WORK/soak.md"
} > "$OUT"
log "wrote $OUT ($(( $(date +%s) - START_S )) s)"
exit "$status"

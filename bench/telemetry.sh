#!/usr/bin/env bash
# The CPU cost of traces per call (issue 14's overhead target: ≤ 5 % with traces
# sampled at 1 %, ≤ 10 % at 100 %):
#
#   bench/telemetry.sh [--quick]
#
# Builds in release mode, starts the fast upstream (HTTP), a real OTLP receiver
# (tests/peers/otlp_receiver.py, so spans really are encoded and sent) and three
# eragates in front of the upstream: metrics only (always on), traces sampled at
# 1 %, traces sampled at 100 %. mcpload sends 2026-07-28 tools/call through each
# in interleaved rounds and reads each eragate's CPU time per call from /proc.
# The metrics' own cost per request is `cargo bench --bench telemetry`.
# Prints a table and writes bench/work/telemetry/telemetry.json.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
ROUNDS=5; WARM=500; DUR=2000
[[ ${1:-} == --quick ]] && { ROUNDS=2; WARM=200; DUR=700; }
WORK="$REPO/bench/work/telemetry"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release"
mkdir -p "$WORK/logs"
export ERAGATE_LOG="${ERAGATE_LOG:-warn}"

log() { printf '[telemetry] %s\n' "$*" >&2; }
"$REPO/tests/peers/install.sh" > /dev/null
# shellcheck disable=SC1091
. "$REPO/.cache/peers/env.sh"
(cd "$REPO" && cargo build --release --locked --quiet -p eragate -p eragate-bench)

CORES=$(nproc)
PIN_LOAD=(); PIN_SERVER=()
if (( CORES >= 2 )); then PIN_LOAD=(taskset -c 0); PIN_SERVER=(taskset -c "1-$((CORES - 1))"); fi

STARTED=()
cleanup() { local pid; for pid in "${STARTED[@]}"; do builtin kill -TERM "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
start() { local name="$1"; shift; "$@" > "$WORK/logs/$name.log" 2>&1 & LAST_PID=$!; STARTED+=("$LAST_PID"); }
free_port() { "$PEERS_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { local i; for i in $(seq 100); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; log "no answer from $1"; exit 1; }

P_UP=$(free_port)
start upstream "${PIN_SERVER[@]}" "$BIN/fast-upstream" --http "127.0.0.1:$P_UP"
start otlp "${PIN_LOAD[@]}" "$PEERS_PYTHON" "$REPO/tests/peers/otlp_receiver.py" 0
for _ in $(seq 100); do grep -q listening "$WORK/logs/otlp.log" 2>/dev/null && break; sleep 0.1; done
OTLP=$("$PEERS_PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["listening"])' "$WORK/logs/otlp.log")

TARGETS=()
for variant in metrics-only:none traces-1pct:0.01 traces-100pct:1.0; do
  name="${variant%%:*}"; ratio="${variant#*:}"; port=$(free_port)
  {
    printf '[listen]\naddress = "127.0.0.1:%s"\n' "$port"
    [[ $ratio == none ]] || printf '[telemetry]\notlp_endpoint = "%s/v1/traces"\nsample_ratio = %s\n' "$OTLP" "$ratio"
    printf '[[upstreams]]\nname = "fast"\n[upstreams.http]\nurl = "http://127.0.0.1:%s/mcp"\n' "$P_UP"
  } > "$WORK/$name.toml"
  start "$name" "${PIN_SERVER[@]}" "$BIN/eragate" run --config "$WORK/$name.toml" --shutdown-grace 1s
  wait_http "http://127.0.0.1:$port/readyz"
  TARGETS+=(--target "name=$name,pattern=modern,url=http://127.0.0.1:$port/mcp,pid=$LAST_PID")
done

log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"${PIN_LOAD[@]}" "$BIN/mcpload" compare --name telemetry --title "traces on the request path" \
  --subject traces-100pct --concurrency 1,16 --rounds "$ROUNDS" --warmup-ms "$WARM" --duration-ms "$DUR" \
  --out "$WORK/telemetry.json" "${TARGETS[@]}" 2> "$WORK/logs/mcpload.log"
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
SPANS=$(curl -fsS "$OTLP/spans" | "$PEERS_PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)))')
log "spans received by the OTLP receiver: $SPANS"

"$PEERS_PYTHON" - "$WORK/telemetry.json" <<'PY'
import json, statistics, sys
data = json.load(open(sys.argv[1]))
rows = {}
for run in data["runs"]:
    rows.setdefault((run["target"], run["concurrency"]), []).append(run)
print("| concurrency | target | CPU µs/call (median, min–max over rounds) | vs metrics only | calls/s (median) |")
print("|---|---|---|---|---|")
for c in data["concurrency"]:
    base = statistics.median(r["cpu_us_per_op"] for r in rows[("metrics-only", c)])
    for target in ("metrics-only", "traces-1pct", "traces-100pct"):
        runs = rows[(target, c)]
        cpu = [r["cpu_us_per_op"] for r in runs]
        med = statistics.median(cpu)
        rate = statistics.median(r["throughput"] for r in runs)
        print(f"| {c} | {target} | {med:.1f} ({min(cpu):.1f}–{max(cpu):.1f}) | {100 * (med / base - 1):+.1f} % | {rate:.0f} |")
PY

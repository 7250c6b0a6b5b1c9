#!/usr/bin/env bash
# Two eragate binaries side by side, timed in one run (issue 17's method for a change
# whose effect is smaller than the host's drift between runs):
#
#   bench/ab.sh BINARY_A BINARY_B [--concurrency 1,16,64] [--rounds 4] [--pattern legacy|modern] [--extra FILE]
#
# One fast upstream (Streamable HTTP) and both eragates in front of it, every server on
# CPU 1 and mcpload on CPU 0 (as bench/run.sh pins them), rounds interleaved A B B A ...
# Prints, per binary and concurrency, the medians over rounds of throughput, p50/p99, the
# proxy's CPU (and user-space CPU) per request and the upstream's CPU per request.
# --extra appends a TOML file to both eragates' configs (keys both binaries understand).
# Build the binaries first (e.g. a worktree of the base commit built with
# `cargo build --release -p eragate --bin eragate`). Scratch files: bench/work/ab/.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"; REPO="$(dirname "$HERE")"
usage() { echo "usage: bench/ab.sh BINARY_A BINARY_B [--concurrency LIST] [--rounds N] [--pattern legacy|modern] [--extra FILE]" >&2; exit 2; }
(($# >= 2)) || usage
A="$1"; B="$2"; shift 2
CONC="1,16,64"; ROUNDS=4; PATTERN=legacy; EXTRA=/dev/null
while (($#)); do
  case "$1" in
    --concurrency) CONC="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --pattern) PATTERN="$2"; shift 2 ;;
    --extra) EXTRA="$2"; shift 2 ;;
    *) usage ;;
  esac
done
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release"
for b in "$A" "$B" "$BIN/fast-upstream" "$BIN/mcpload"; do
  [[ -x $b ]] || { echo "ab.sh: $b missing (cargo build --release --workspace)" >&2; exit 1; }
done
PIN_LOAD=(); PIN_SERVER=()
if (($(nproc) >= 2)); then PIN_LOAD=(taskset -c 0); PIN_SERVER=(taskset -c "1-$(($(nproc) - 1))"); fi

WORK="$REPO/bench/work/ab"; rm -rf "$WORK"; mkdir -p "$WORK"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
until_ok() { local i; for i in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done; return 1; }

P_UP=$(free_port)
"${PIN_SERVER[@]}" "$BIN/fast-upstream" --http "127.0.0.1:$P_UP" > "$WORK/upstream.log" 2>&1 & UP_PID=$!; PIDS+=("$UP_PID")
until_ok "$BIN/mcpload" probe --url "http://127.0.0.1:$P_UP/mcp" --pattern legacy
targets=()
for side in A B; do
  binary="$A"; [[ $side == B ]] && binary="$B"
  port=$(free_port)
  cat > "$WORK/$side.toml" <<TOML
[listen]
address = "127.0.0.1:$port"

[[upstreams]]
name = "fast"
max_in_flight = 4096
[upstreams.http]
url = "http://127.0.0.1:$P_UP/mcp"
TOML
  cat "$EXTRA" >> "$WORK/$side.toml"
  "${PIN_SERVER[@]}" "$binary" run --config "$WORK/$side.toml" > "$WORK/$side.log" 2>&1 & pid=$!; PIDS+=("$pid")
  until_ok "$BIN/mcpload" probe --url "http://127.0.0.1:$port/mcp" --pattern "$PATTERN" \
    || { echo "ab.sh: eragate $side did not answer; see $WORK/$side.log" >&2; exit 1; }
  targets+=(--target "name=$side,pattern=$PATTERN,url=http://127.0.0.1:$port/mcp,pid=$pid,upstream=$UP_PID")
done
"${PIN_LOAD[@]}" "$BIN/mcpload" compare --name ab --title "A: $A / B: $B" --subject A "${targets[@]}" \
  --concurrency "$CONC" --rounds "$ROUNDS" --warmup-ms 500 --duration-ms 2000 --out "$WORK/ab.json" >&2
python3 - "$WORK/ab.json" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))["runs"]
fields = ["throughput", "p50_us", "p99_us", "cpu_us_per_op", "user_cpu_us_per_op", "upstream_cpu_us_per_op"]
print("| binary | c | " + " | ".join(fields) + " |")
print("|---|---:|" + "---:|" * len(fields))
for c in sorted({r["concurrency"] for r in runs}):
    for side in ("A", "B"):
        rows = [r for r in runs if r["target"] == side and r["concurrency"] == c]
        def median(field):
            values = [r[field] for r in rows if isinstance(r.get(field), (int, float))]
            return f"{statistics.median(values):.1f}" if values else "-"
        print(f"| {side} | {c} | " + " | ".join(median(f) for f in fields) + " |")
PY

#!/usr/bin/env bash
# Instructions eragate executes per proxied `tools/call`, counted by callgrind:
#
#   bench/instructions.sh [--seconds N] [--no-build] [--oauth off|on|both] [--telemetry] [--list] [--federated] [--pins]
#                         [--shared-rate-limit [--baseline BINARY]]
#
# Wall-clock and CPU-time figures need a quiet machine; instruction counts do not
# (callgrind counts the same total whatever else runs). This runs eragate under
# `valgrind --tool=callgrind` in front of the fast upstream (Streamable HTTP) with
# OAuth off and on (EdDSA JWTs from bench-issuer), drives it with one mcpload worker
# per client era for N seconds (default 20) after a warm-up, zeroes the counters
# between warm-up and measurement (callgrind_control), and prints instructions per
# completed call for each case, and the OAuth cost as a ratio. With --telemetry it
# measures traces instead (issue 14's overhead target): OAuth off, spans exported as
# OTLP to a real receiver (tests/peers/otlp_receiver.py) sampled at 1 % and 100 %,
# against metrics only (always on). With --federated it measures a `tools/call` on a
# federated path (two fast upstreams as members, `fast_echo`) against the same call to a
# single upstream (issue 16's target: within 10 %). With --pins it measures a `tools/call`
# with `[upstreams.pins] mode = "warn"` (pins written on first use) against `off` (issue
# 37's target: within 1 %). With --shared-rate-limit it measures a `tools/call` spending a
# per-principal limit shared through Redis (a redis-server of its own on a free port, no
# persistence; a limit never reached, so every call pays the count's round trip) against no
# limit, and the same with --baseline, an eragate built from 992f145 (the hand-written RESP
# client; issue 38's target: within 10 %), then checks that 30 calls spread over two
# eragates sharing a limit of 10 a minute pass exactly 10. Needs valgrind (and redis-server).
# Scratch files go to bench/work/instructions/.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_CASE=20
BUILD=1
TELEMETRY=0
LIST=0
FEDERATED=0
PINS=0
SHARED=0
BASELINE=""
OAUTH_CASES="off on"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_PER_CASE="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;; # measure the release binaries already in target/release
    --oauth) case "$2" in off|on) OAUTH_CASES="$2" ;; both) OAUTH_CASES="off on" ;; *) echo "--oauth off|on|both" >&2; exit 2 ;; esac; shift 2 ;;
    --telemetry) TELEMETRY=1; shift ;;
    # Issue 16: a 2026-07-28 tools/list answered from the list cache against a proxied tools/call.
    --list) LIST=1; shift ;;
    # Issue 16: a tools/call through a federation of two members against a single upstream's.
    --federated) FEDERATED=1; shift ;;
    # Issue 37: a tools/call with definition pins in warn mode against pins off.
    --pins) PINS=1; shift ;;
    # Issue 38: a tools/call spending a shared (Redis) rate limit against none; --baseline:
    # the same with an older eragate binary (992f145: `[rate_limits.redis] address`, RESP client).
    --shared-rate-limit) SHARED=1; shift ;;
    --baseline) BASELINE="$2"; shift 2 ;;
    *) echo "usage: bench/instructions.sh [--seconds N] [--no-build] [--oauth off|on|both] [--telemetry] [--list] [--federated] [--pins] [--shared-rate-limit [--baseline BINARY]]" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null && command -v callgrind_control >/dev/null \
  || { echo "instructions.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
if ((SHARED)); then
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null \
    || { echo "instructions.sh: --shared-rate-limit needs redis-server and redis-cli" >&2; exit 1; }
  [[ -z $BASELINE || -x $BASELINE ]] || { echo "instructions.sh: --baseline $BASELINE is not executable" >&2; exit 1; }
elif [[ -n $BASELINE ]]; then
  echo "instructions.sh: --baseline goes with --shared-rate-limit" >&2; exit 2
fi

WORK="$REPO/bench/work/instructions"
rm -rf "$WORK"; mkdir -p "$WORK"
if ((BUILD)); then
  (cd "$REPO" && cargo build --release --quiet --locked --bin eragate -p eragate \
    && cargo build --release --quiet --locked -p eragate-bench)
fi
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

P_UP=$(free_port); P_ISS=$(free_port)
"$BIN/fast-upstream" --http "127.0.0.1:$P_UP" > "$WORK/upstream.log" 2>&1 & PIDS+=($!)
"$BIN/bench-issuer" "127.0.0.1:$P_ISS" > "$WORK/issuer.log" 2>&1 & PIDS+=($!)

until_ok() { local i; for i in $(seq 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done; return 1; }
until_ok "$BIN/mcpload" probe --url "http://127.0.0.1:$P_UP/mcp" --pattern legacy
until_ok curl -fsS "http://127.0.0.1:$P_ISS/.well-known/oauth-authorization-server"

# One eragate under callgrind per case; prints "INSTRUCTIONS OPS".
measure() { # NAME CONFIG URL PATTERN [TOKEN_FILE]; the tool called is $TOOL (default echo), the binary $ERAGATE
  local name="$1" config="$2" url="$3" pattern="$4" token="${5:-}" extra=() target tool="${TOOL:-echo}"
  [[ -n $token ]] && extra=(--token-file "$token")
  extra+=(--tool "$tool")
  valgrind --tool=callgrind --callgrind-out-file="$WORK/$name.%p.out" \
    "${ERAGATE:-$BIN/eragate}" run --config "$config" > "$WORK/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  until_ok "$BIN/mcpload" probe --url "$url" --pattern "$pattern" "${extra[@]}" \
    || { echo "$name: eragate did not answer; see $WORK/$name.log" >&2; exit 1; }
  # mcpload compares two targets: both are this eragate (measured one after the other).
  target="pattern=$pattern,url=$url,tool=$tool"
  [[ -n $token ]] && target+=",token_file=$token"
  # Warm-up (sessions, caches, the token's first verification), then zero and measure.
  "$BIN/mcpload" compare --name "$name-warm" --title warm --subject "$name-a" \
    --target "name=$name-a,$target" --target "name=$name-b,$target" \
    --concurrency 1 --rounds 1 --warmup-ms 0 --duration-ms 3000 --out "$WORK/$name-warm.json" >/dev/null
  callgrind_control -z "$pid" >/dev/null
  "$BIN/mcpload" compare --name "$name" --title measure --subject "$name-a" \
    --target "name=$name-a,$target" --target "name=$name-b,$target" \
    --concurrency 1 --rounds 1 --warmup-ms 0 --duration-ms "$((SECONDS_PER_CASE * 1000))" \
    --out "$WORK/$name.json" >/dev/null
  callgrind_control -d "$pid" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local ops instructions
  ops=$(python3 -c 'import json,sys; print(sum(x["ops"] for x in json.load(open(sys.argv[1]))["runs"]))' "$WORK/$name.json")
  # The dump taken after zeroing (the highest-numbered part) holds the measured window.
  instructions=$(for f in "$WORK/$name".*.out.*; do grep -h '^summary:' "$f" | awk '{print $2}'; done | sort -n | tail -1)
  echo "$instructions $ops"
}

config() { # PORT [oauth | list-cache | SAMPLE_RATIO]
  printf '[listen]\naddress = "127.0.0.1:%s"\n' "$1"
  case "${2:-}" in
    "" | list-cache) ;;
    oauth) printf '[auth.oauth]\nissuer = "http://127.0.0.1:%s"\nrequired_scopes = ["mcp:tools"]\n' "$P_ISS" ;;
    *) printf '[telemetry]\notlp_endpoint = "%s/v1/traces"\nsample_ratio = %s\n' "$OTLP" "$2" ;;
  esac
  printf '[[upstreams]]\nname = "fast"\n[upstreams.http]\nurl = "http://127.0.0.1:%s/mcp"\n' "$P_UP"
  # The fast upstream cannot announce list changes: its lists are kept for the re-list interval.
  [[ ${2:-} == list-cache ]] && printf '[upstreams.cache]\nrelist_interval = "600s"\n'
  return 0
}

# Prints one table row per client era for a case and keeps its figure in PER_CALL.
declare -A PER_CALL
measure_case() { # KEY LABEL CONFIG_FILE URL [TOKEN_FILE]
  local key="$1" label="$2" cfg="$3" url="$4" token="${5:-}" pattern instructions ops per_call
  for pattern in legacy modern; do
    read -r instructions ops < <(measure "$key-$pattern" "$cfg" "$url" "$pattern" "$token")
    per_call=$((instructions / ops))
    PER_CALL[$key-$pattern]=$per_call
    printf '| %s, %s client (%s calls) | %s |\n' "$label" "$pattern" "$ops" "$per_call"
  done
}
ratio_rows() { # LABEL KEY_ON KEY_OFF
  local pattern
  for pattern in legacy modern; do
    python3 -c 'import sys; on, off = int(sys.argv[2]), int(sys.argv[3]); print(f"| {sys.argv[4]}, {sys.argv[1]} client | {on/off:.3f} ({on-off:+d} instructions per call) |")' \
      "$pattern" "${PER_CALL[$2-$pattern]}" "${PER_CALL[$3-$pattern]}" "$1"
  done
}

printf '| case | instructions per call |\n|---|---|\n'
if ((TELEMETRY)); then
  # A real OTLP receiver, so spans really are encoded and sent (the exporter's thread
  # is part of eragate's process, so callgrind counts it).
  OTLP_LOG="$WORK/otlp.log"
  "$REPO/tests/peers/install.sh" > /dev/null
  # shellcheck disable=SC1091
  . "$REPO/.cache/peers/env.sh"
  "$PEERS_PYTHON" "$REPO/tests/peers/otlp_receiver.py" 0 > "$OTLP_LOG" 2>&1 & PIDS+=($!)
  until_ok grep -q listening "$OTLP_LOG"
  OTLP=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["listening"])' "$OTLP_LOG")
  for variant in metrics-only:"" traces-1pct:0.01 traces-100pct:1.0; do
    name="${variant%%:*}"; port=$(free_port)
    config "$port" "${variant#*:}" > "$WORK/$name.toml"
    measure_case "$name" "$name" "$WORK/$name.toml" "http://127.0.0.1:$port/mcp"
  done
  ratio_rows "traces at 1 % / metrics only" traces-1pct metrics-only
  ratio_rows "traces at 100 % / metrics only" traces-100pct metrics-only
  echo "spans received by the OTLP receiver: $(curl -fsS "$OTLP/spans" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')"
  exit 0
fi
if ((FEDERATED)); then
  # A second member, so that the path really is a federation (names prefixed, calls routed).
  P_UP2=$(free_port)
  "$BIN/fast-upstream" --http "127.0.0.1:$P_UP2" > "$WORK/upstream2.log" 2>&1 & PIDS+=($!)
  until_ok "$BIN/mcpload" probe --url "http://127.0.0.1:$P_UP2/mcp" --pattern legacy
  port=$(free_port)
  config "$port" > "$WORK/single.toml"
  measure_case single "single upstream" "$WORK/single.toml" "http://127.0.0.1:$port/mcp"
  port=$(free_port)
  { config "$port"; printf '[[upstreams]]\nname = "other"\n[upstreams.http]\nurl = "http://127.0.0.1:%s/mcp"\n' "$P_UP2"; } \
    > "$WORK/federated.toml"
  TOOL=fast_echo measure_case federated "federated, 2 members" "$WORK/federated.toml" "http://127.0.0.1:$port/mcp"
  ratio_rows "federated / single" federated single
  exit 0
fi
if ((PINS)); then
  port=$(free_port)
  config "$port" > "$WORK/pins-off.toml"
  measure_case pins-off "pins off" "$WORK/pins-off.toml" "http://127.0.0.1:$port/mcp"
  port=$(free_port)
  rm -f "$WORK/pins.json"
  { config "$port"; printf '[upstreams.pins]\nmode = "warn"\nstore = "%s"\n' "$WORK/pins.json"; } > "$WORK/pins-warn.toml"
  measure_case pins-warn "pins warn" "$WORK/pins-warn.toml" "http://127.0.0.1:$port/mcp"
  ratio_rows "pins warn / off" pins-warn pins-off
  exit 0
fi
if ((SHARED)); then
  P_REDIS=$(free_port)
  redis-server --bind 127.0.0.1 --port "$P_REDIS" --save "" --appendonly no > "$WORK/redis.log" 2>&1 & PIDS+=($!)
  until_ok redis-cli -p "$P_REDIS" ping
  # A limit never reached (4e9 an hour, one window: PEXPIRE only on its first count), so every
  # call is counted in Redis and none refused. A generous timeout: callgrind is slow.
  limit() { # REQUESTS PER
    printf '[rate_limits]\nper_principal = { requests = %s, per = "%s", shared = true }\n' "$1" "$2"
  }
  # This build: `[redis] url` (also polls ended sessions every 200 ms), and the deprecated
  # `[rate_limits.redis] address` that 992f145 understands (the same file for both binaries).
  shared_new() { limit "$@"; printf '[redis]\nurl = "redis://127.0.0.1:%s"\ntimeout = "5s"\n' "$P_REDIS"; }
  shared_old() { limit "$@"; printf '[rate_limits.redis]\naddress = "127.0.0.1:%s"\ntimeout = "5s"\n' "$P_REDIS"; }
  scripts_run() { # the count scripts Redis ran since its statistics were reset
    redis-cli -p "$P_REDIS" info commandstats | tr -d '\r' \
      | awk -F'[=,:]' '/^cmdstat_eval(sha)?:/ {n += $3} END {print n + 0}'
  }
  shared_case() { # KEY LABEL CONFIG_FILE URL
    local ops=0 pattern
    redis-cli -p "$P_REDIS" config resetstat > /dev/null
    measure_case "$@"
    for pattern in legacy modern; do
      ops=$((ops + $(python3 -c 'import json,sys; print(sum(x["ops"] for x in json.load(open(sys.argv[1]))["runs"]))' "$WORK/$1-$pattern.json")))
    done
    printf '| (%s: Redis ran %s count scripts for %s measured calls and their warm-ups) | |\n' "$1" "$(scripts_run)" "$ops"
  }
  port=$(free_port)
  config "$port" > "$WORK/no-limit.toml"
  measure_case no-limit "no rate limit" "$WORK/no-limit.toml" "http://127.0.0.1:$port/mcp"
  port=$(free_port)
  { config "$port"; shared_new 4000000000 1h; } > "$WORK/shared.toml"
  shared_case shared "shared limit, [redis] url" "$WORK/shared.toml" "http://127.0.0.1:$port/mcp"
  port=$(free_port)
  { config "$port"; shared_old 4000000000 1h; } > "$WORK/shared-address.toml"
  shared_case shared-address "shared limit, [rate_limits.redis] address" "$WORK/shared-address.toml" "http://127.0.0.1:$port/mcp"
  if [[ -n $BASELINE ]]; then
    port=$(free_port)
    config "$port" > "$WORK/baseline-no-limit.toml"
    ERAGATE="$BASELINE" measure_case baseline-no-limit "baseline, no rate limit" "$WORK/baseline-no-limit.toml" "http://127.0.0.1:$port/mcp"
    port=$(free_port)
    { config "$port"; shared_old 4000000000 1h; } > "$WORK/baseline-shared.toml"
    ERAGATE="$BASELINE" shared_case baseline-shared "baseline, shared limit ([rate_limits.redis] address)" "$WORK/baseline-shared.toml" "http://127.0.0.1:$port/mcp"
  fi
  ratio_rows "shared ([redis] url) / no limit" shared no-limit
  if [[ -n $BASELINE ]]; then
    ratio_rows "baseline shared / baseline no limit" baseline-shared baseline-no-limit
    ratio_rows "shared ([redis] url) / baseline shared" shared baseline-shared
    ratio_rows "shared (address) / baseline shared" shared-address baseline-shared
    for pattern in legacy modern; do
      python3 -c 'import sys; a, b, c, d = map(int, sys.argv[2:6]); print(f"| the count alone (shared - no limit), this build / baseline, {sys.argv[1]} client | {a-b:+d} / {c-d:+d} = {(a-b)/(c-d):.3f} |")' \
        "$pattern" "${PER_CALL[shared-$pattern]}" "${PER_CALL[no-limit-$pattern]}" \
        "${PER_CALL[baseline-shared-$pattern]}" "${PER_CALL[baseline-no-limit-$pattern]}"
    done
  fi
  # Exact counts across replicas: two eragates (this build, not under callgrind) share 10 a
  # minute; 30 calls at once, alternating between them, must pass exactly 10.
  redis-cli -p "$P_REDIS" flushall > /dev/null
  exact_urls=()
  for side in a b; do
    port=$(free_port)
    { config "$port"; shared_new 10 1m; } > "$WORK/exact-$side.toml"
    "$BIN/eragate" run --config "$WORK/exact-$side.toml" > "$WORK/exact-$side.log" 2>&1 & PIDS+=($!)
    # Only a connection, no request: every request would spend the limit.
    until_ok python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port"
    exact_urls+=("http://127.0.0.1:$port/mcp")
  done
  call_body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"curl","version":"0"}}}}'
  curls=()
  for i in $(seq 30); do
    curl -s -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
      -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
      -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo' --data "$call_body" "${exact_urls[i % 2]}" \
      >> "$WORK/exact.codes" &
    curls+=($!)
  done
  wait "${curls[@]}" || true
  echo "exact counts, 30 calls at once over two eragates sharing 10 a minute: $(sort "$WORK/exact.codes" | uniq -c | awk '{printf "%s× HTTP %s  ", $1, $2}')"
  [[ $(grep -c '^200$' "$WORK/exact.codes") == 10 && $(grep -c '^429$' "$WORK/exact.codes") == 20 ]] \
    || { echo "shared limit not exact: expected 10× 200 and 20× 429" >&2; exit 1; }
  exit 0
fi
if ((LIST)); then
  port=$(free_port)
  config "$port" list-cache > "$WORK/list.toml"
  url="http://127.0.0.1:$port/mcp"
  for pattern in list modern; do
    read -r instructions ops < <(measure "list-cache-$pattern" "$WORK/list.toml" "$url" "$pattern")
    PER_CALL[$pattern]=$((instructions / ops))
    printf '| list cache on, 2026-07-28 %s (%s requests) | %s |\n' \
      "$([[ $pattern == list ]] && echo 'tools/list (cached)' || echo 'tools/call')" "$ops" "${PER_CALL[$pattern]}"
  done
  python3 -c 'import sys; l, c = int(sys.argv[1]), int(sys.argv[2]); print(f"| cached tools/list / tools/call | {l/c:.3f} ({l-c:+d} instructions per request) |")' \
    "${PER_CALL[list]}" "${PER_CALL[modern]}"
  exit 0
fi
for auth in $OAUTH_CASES; do
  port=$(free_port)
  url="http://127.0.0.1:$port/mcp"
  token=""
  if [[ $auth == on ]]; then
    config "$port" oauth > "$WORK/oauth.toml"; cfg="$WORK/oauth.toml"
    token="$WORK/token"
    curl -fsS -o "$token" "http://127.0.0.1:$P_ISS/token?aud=$url&scope=mcp:tools"
  else
    config "$port" > "$WORK/plain.toml"; cfg="$WORK/plain.toml"
  fi
  measure_case "oauth-$auth" "OAuth $auth" "$cfg" "$url" "$token"
done
if [[ $OAUTH_CASES == "off on" ]]; then
  ratio_rows "OAuth on / off" oauth-on oauth-off
fi

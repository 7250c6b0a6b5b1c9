#!/usr/bin/env bash
# Self-test of the peer tooling, without eragate: drives legacy_server.py and server-everything
# directly with py_client.py and ts_client.mjs on every transport, and checks that a
# 2026-07-28 client cannot use the legacy-only servers. Prints "N passed, N failed".
# Usage: tests/peers/selftest.sh
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/install.sh" >/dev/null || exit 1
# shellcheck disable=SC1091
. "${ERAGATE_PEERS:-$HERE/../../.cache/peers}/env.sh"

LOGDIR="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

free_port() { "$PEERS_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

start_legacy() { # transport port [flags] -> prints URL
  "$PEERS_PYTHON" "$HERE/legacy_server.py" "$1" --port "$2" "${@:3}" >"$LOGDIR/legacy-$1-$2.out" 2>"$LOGDIR/legacy-$1-$2.err" &
  PIDS+=($!)
  wait_port "$2"
}
start_ts2() { # port
  "$PEERS_NODE20" "$HERE/ts2_server.mjs" http --port "$1" >"$LOGDIR/ts2-$1.out" 2>"$LOGDIR/ts2-$1.err" &
  PIDS+=($!)
  wait_port "$1"
}
start_everything() { # transport port
  PORT="$2" "$PEERS_NODE20" --require "$BIND_LOCALHOST_CJS" "$EVERYTHING_JS" "$1" >"$LOGDIR/everything-$1.log" 2>&1 &
  PIDS+=($!)
  wait_port "$2"
}

LH=$(free_port); start_legacy http "$LH"
LS=$(free_port); start_legacy sse "$LS"
EH=$(free_port); start_everything streamableHttp "$EH"
ES=$(free_port); start_everything sse "$ES"
T2=$(free_port); start_ts2 "$T2"

PASS=0; FAIL=0
# check NAME EXPECT(ok|fail) PY_ASSERTION -- command...
check() {
  local name="$1" expect="$2" assertion="$3"; shift 4
  local out rc
  out="$("$@" 2>"$LOGDIR/last.err")"; rc=$?
  if [[ $expect == fail ]]; then
    if [[ $rc != 0 ]]; then PASS=$((PASS+1)); echo "ok   $name (failed as expected: $(tail -1 "$LOGDIR/last.err"))"
    else FAIL=$((FAIL+1)); echo "FAIL $name: expected failure, got $out"; fi
    return
  fi
  if [[ $rc == 0 ]] && printf '%s' "$out" | "$PEERS_PYTHON" -c "import json,sys; d=json.load(sys.stdin); r=d['results']; assert $assertion, d" 2>>"$LOGDIR/last.err"; then
    PASS=$((PASS+1)); echo "ok   $name"
  else
    FAIL=$((FAIL+1)); echo "FAIL $name (rc=$rc)"; tail -5 "$LOGDIR/last.err"
  fi
}

FIXTURE_FULL="r['call_echo']['text']=='echo: hi' and r['call_add']['structured']=={'sum':5} and r['call_meteo']['text']=='météo: Zürich' and r['read_static']['text']=='hello world' and r['read_template']['text']=='item 42' and r['get_prompt']['text']=='Hello, Ada!' and r['complete']['values']==['alice']"
EVERYTHING_FULL="r['call_echo']['text']=='Echo: hi' and r['call_add']['text']=='The sum of 2 and 3 is 5.' and r['read_template']['text'].startswith('Resource 42:') and r['get_prompt']['text']==\"What's weather in Ada?\" and r['complete']['values']==['Engineering']"
PY=("$PEERS_PYTHON" "$HERE/py_client.py")
TS=("$PEERS_NODE20" "$HERE/ts_client.mjs")
LSTDIO="$PEERS_PYTHON $HERE/legacy_server.py stdio"
ESTDIO="$PEERS_NODE20 $EVERYTHING_JS stdio"

for mode in legacy auto; do
  check "py $mode fixture http"  ok "$FIXTURE_FULL and d['protocol_version']=='2025-11-25'" -- "${PY[@]}" --mode $mode --url "http://127.0.0.1:$LH/mcp"
  check "py $mode fixture sse"   ok "$FIXTURE_FULL" -- "${PY[@]}" --mode $mode --sse "http://127.0.0.1:$LS/sse"
  check "py $mode fixture stdio" ok "$FIXTURE_FULL" -- "${PY[@]}" --mode $mode --stdio "$LSTDIO"
  check "py $mode everything http"  ok "$EVERYTHING_FULL" -- "${PY[@]}" --mode $mode --profile everything --url "http://127.0.0.1:$EH/mcp"
  check "py $mode everything sse"   ok "$EVERYTHING_FULL" -- "${PY[@]}" --mode $mode --profile everything --sse "http://127.0.0.1:$ES/sse"
  check "py $mode everything stdio" ok "$EVERYTHING_FULL" -- "${PY[@]}" --mode $mode --profile everything --stdio "$ESTDIO"
done
check "py 2026 fixture http refused"  fail "" -- "${PY[@]}" --mode 2026-07-28 --scenario tools --url "http://127.0.0.1:$LH/mcp"
check "py 2026 fixture sse refused"   fail "" -- "${PY[@]}" --mode 2026-07-28 --scenario tools --sse "http://127.0.0.1:$LS/sse"
check "py 2026 fixture stdio refused" fail "" -- "${PY[@]}" --mode 2026-07-28 --scenario tools --stdio "$LSTDIO"
check "py 2026 everything http refused" fail "" -- "${PY[@]}" --mode 2026-07-28 --profile everything --scenario tools --url "http://127.0.0.1:$EH/mcp"
check "py 2026 dual-era stdio (reference)" ok "$FIXTURE_FULL and d['protocol_version']=='2026-07-28'" -- "${PY[@]}" --mode 2026-07-28 --stdio "$LSTDIO --dual-era"
# The TypeScript SDK v2 server (modern, also serves 2025-era requests statelessly).
T2STDIO="$PEERS_NODE20 $HERE/ts2_server.mjs stdio"
check "py 2026 ts2 http"  ok "$FIXTURE_FULL and d['protocol_version']=='2026-07-28'" -- "${PY[@]}" --mode 2026-07-28 --url "http://127.0.0.1:$T2/mcp"
check "py auto ts2 http"  ok "$FIXTURE_FULL and d['protocol_version']=='2026-07-28' and d['server_info']['name']=='eragate-ts2-fixture'" -- "${PY[@]}" --mode auto --url "http://127.0.0.1:$T2/mcp"
check "py 2026 ts2 stdio" ok "$FIXTURE_FULL and d['protocol_version']=='2026-07-28'" -- "${PY[@]}" --mode 2026-07-28 --stdio "$T2STDIO"
check "py 2026 ts2 errors" ok "r['read_unknown_resource']['error']['code']==-32602 and r['read_unknown_resource']['error']['data']=={'uri':'test://nope'}" -- "${PY[@]}" --mode 2026-07-28 --scenario errors --url "http://127.0.0.1:$T2/mcp"
for v in 2024-11-05 2025-03-26 2025-06-18; do
  check "py offer $v fixture http" ok "d['protocol_version']=='$v'" -- "${PY[@]}" --mode legacy --offer-version $v --scenario tools --url "http://127.0.0.1:$LH/mcp"
  check "ts offer $v everything http" ok "d['protocol_version']=='$v'" -- "${TS[@]}" --profile everything --offer-version $v --scenario tools --url "http://127.0.0.1:$EH/mcp"
done
check "ts fixture http"  ok "$FIXTURE_FULL" -- "${TS[@]}" --url "http://127.0.0.1:$LH/mcp"
check "ts fixture sse"   ok "$FIXTURE_FULL" -- "${TS[@]}" --sse "http://127.0.0.1:$LS/sse"
check "ts fixture stdio" ok "$FIXTURE_FULL" -- "${TS[@]}" --stdio "$LSTDIO"
check "ts everything http"  ok "$EVERYTHING_FULL" -- "${TS[@]}" --profile everything --url "http://127.0.0.1:$EH/mcp"
check "ts everything sse"   ok "$EVERYTHING_FULL" -- "${TS[@]}" --profile everything --sse "http://127.0.0.1:$ES/sse"
check "ts everything stdio" ok "$EVERYTHING_FULL" -- "${TS[@]}" --profile everything --stdio "$ESTDIO"
for c in "${PY[*]} --mode legacy" "${TS[*]}"; do
  # shellcheck disable=SC2086
  check "${c##*/} progress"  ok "r['progress']['progress']==[1,2,3] and r['progress']['text']=='done'" -- $c --scenario progress --url "http://127.0.0.1:$LH/mcp"
  # shellcheck disable=SC2086
  check "${c##*/} logging"   ok "r['logging']['call_info']=='suppressed info' and [m['level'] for m in r['logging']['received']]==['error']" -- $c --scenario logging --url "http://127.0.0.1:$LH/mcp"
  # shellcheck disable=SC2086
  check "${c##*/} errors"    ok "r['call_fail']['is_error'] and r['read_unknown_resource']['error']['code']==-32002 and r['read_unknown_resource']['error']['data']=={'uri':'test://nope'}" -- $c --scenario errors --url "http://127.0.0.1:$LH/mcp"
  # shellcheck disable=SC2086
  check "${c##*/} cancel"    ok "r['cancel']['hang']['code']==-32001 and r['cancel']['after']['text']=='echo: still alive'" -- $c --scenario cancel --url "http://127.0.0.1:$LH/mcp"
done

echo "$PASS passed, $FAIL failed"
[[ $FAIL == 0 ]]

# Process bookkeeping shared by bench/run.sh and bench/soak.sh (sourced, not run):
# start/stop exactly the processes a script started, their descendants too, and
# sweep strays by the run's token. The caller defines WORK (logs go to
# $WORK/logs), RUN_ID (exported as ERAGATE_BENCH_RUN), BIN (where mcpload is, unless MCPLOAD names it),
# log and die, and sets
#   trap cleanup EXIT; trap 'exit 130' INT TERM
# shellcheck shell=bash
STARTED=()   # pids of every process this script started, in order

descendants() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    descendants "$child"
    echo "$child"
  done
}

is_pid() { [[ "$1" =~ ^[0-9]+$ ]] && (( $1 > 1 )); }

# Stops one process we started and everything below it: TERM to the root first
# (eragate and the bridges stop their own children), then to what is left, then
# KILL. Always one exact, positive pid at a time (the shell's builtin kill).
stop_tree() {
  local root="$1" pid i
  is_pid "$root" || return 0
  local tree
  mapfile -t tree < <(descendants "$root"; echo "$root")
  builtin kill -TERM "$root" 2>/dev/null || true
  for i in $(seq 50); do builtin kill -0 "$root" 2>/dev/null || break; sleep 0.1; done
  for pid in "${tree[@]}"; do is_pid "$pid" && builtin kill -TERM "$pid" 2>/dev/null || true; done
  for i in $(seq 30); do
    local alive=0
    for pid in "${tree[@]}"; do builtin kill -0 "$pid" 2>/dev/null && alive=1; done
    (( alive )) || break
    sleep 0.1
  done
  for pid in "${tree[@]}"; do is_pid "$pid" && builtin kill -KILL "$pid" 2>/dev/null || true; done
  wait "$root" 2>/dev/null || true
}

# Strays: processes carrying this run's token that outlived their parents.
sweep() {
  local env pid
  for env in /proc/[0-9]*/environ; do
    pid="${env#/proc/}"; pid="${pid%/environ}"
    is_pid "$pid" && [[ $pid != "$$" ]] || continue
    if grep -qxz "ERAGATE_BENCH_RUN=$RUN_ID" "$env" 2>/dev/null; then
      log "stopping stray process $pid ($(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-80))"
      builtin kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

cleanup() {
  local i
  for (( i=${#STARTED[@]}-1; i>=0; i-- )); do stop_tree "${STARTED[i]}"; done
  STARTED=()
  sweep
}

# start NAME CMD...: runs CMD in the background, logs to $WORK/logs/NAME.log, sets $LAST_PID.
start() {
  local name="$1"; shift
  "$@" > "$WORK/logs/$name.log" 2>&1 &
  LAST_PID=$!
  STARTED+=("$LAST_PID")
}

stop() {
  local pid="$1" kept=() p
  stop_tree "$pid"
  for p in "${STARTED[@]}"; do [[ $p == "$pid" ]] || kept+=("$p"); done
  STARTED=("${kept[@]}")
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_http() { # URL PID: until GET URL answers 200
  local url="$1" pid="$2" i
  for i in $(seq 300); do
    builtin kill -0 "$pid" 2>/dev/null || die "process $pid for $url exited; see $WORK/logs/"
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  die "$url not ready"
}

wait_mcp() { # URL PID PATTERN [PROBE ARGS]: until one tools/call succeeds
  local url="$1" pid="$2" pattern="$3" extra=() i
  [[ -n ${4:-} ]] && read -r -a extra <<< "$4"
  for i in $(seq 300); do
    builtin kill -0 "$pid" 2>/dev/null || die "process $pid for $url exited; see $WORK/logs/"
    "${MCPLOAD:-$BIN/mcpload}" probe --url "$url" --pattern "$pattern" "${extra[@]}" 2>/dev/null && return 0
    sleep 0.1
  done
  "${MCPLOAD:-$BIN/mcpload}" probe --url "$url" --pattern "$pattern" "${extra[@]}" || true
  die "$url does not serve MCP"
}

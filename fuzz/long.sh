#!/usr/bin/env bash
# The long runs whose figures fuzz/README.md records:
#
#   fuzz/long.sh [MAX_SECONDS_PER_TARGET] [TARGET...]   (default 1800 s, every target)
#
# Each target runs until 10 million executions or MAX_SECONDS, whichever comes
# first, under nice -n 10 with -jobs=1 (one fuzzing process, so other work keeps
# a core), from its seed corpus; new inputs accumulate in fuzz/corpus/TARGET.
# libFuzzer's log of each run goes to fuzz/corpus/TARGET-long.log; its last
# lines give executions, exec/s, coverage (cov/ft) and corpus size.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX="${1:-1800}"; shift || true
FLAGS=(-O -a -s none)
cargo +nightly fuzz build "${FLAGS[@]}"
if (($#)); then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
for target in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
  log="fuzz/corpus/$target-long.log"
  echo "fuzz/long.sh: $target (10M runs or ${MAX} s), log in $log"
  # -jobs=1 runs the fuzzer in one child process whose output libFuzzer writes
  # to fuzz-0.log in the working directory (the repository root).
  status=0
  nice -n 10 cargo +nightly fuzz run "${FLAGS[@]}" "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
    -jobs=1 -runs=10000000 -max_total_time="$MAX" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    > /dev/null 2>&1 || status=$?
  mv fuzz-0.log "$log" 2>/dev/null || mv fuzz/fuzz-0.log "$log"
  grep -E '^#[0-9]+ +(DONE|pulse)|^stat::' "$log" | tail -n 4
  if (( status != 0 )); then
    echo "fuzz/long.sh: $target stopped with status $status: see $log and fuzz/artifacts/$target/" >&2
  fi
done

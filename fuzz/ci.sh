#!/usr/bin/env bash
# A short run of every cargo-fuzz target over its seed corpus, for CI (.ci/run):
#
#   fuzz/ci.sh [SECONDS_PER_TARGET]     (default 20)
#
# Installs what it needs when missing (a nightly toolchain, cargo-fuzz), builds
# every target once, then fuzzes each for the given time starting from
# fuzz/seeds/TARGET (new inputs go to fuzz/corpus/TARGET, ignored by git).
# A crash, a failed property or a leak of memory past 2 GiB fails the script;
# libFuzzer names the artifact to reproduce it with (see fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PER_TARGET="${1:-20}"
# The flags of the long runs in fuzz/README.md: optimised, with debug assertions
# and overflow checks, no sanitizer (eragate forbids unsafe code). At opt-level 1 the build
# takes three quarters of the time and the targets run as fast (fuzz/README.md, "In CI").
FLAGS=(-O -a -s none)
export CARGO_PROFILE_RELEASE_OPT_LEVEL=1

# cargo fuzz needs nightly. A machine that has none and cannot fetch one (only package
# registries reachable) skips the fuzz run loudly rather than failing everything after it.
if ! rustup toolchain list | grep -q '^nightly'; then
  if ! rustup toolchain install nightly --profile minimal; then
    echo "fuzz/ci.sh: SKIPPED: no nightly toolchain here and none could be installed" >&2
    exit 0
  fi
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

start=$(date +%s)
cargo +nightly fuzz build "${FLAGS[@]}"
echo "fuzz/ci.sh: built in $(( $(date +%s) - start )) s"
mapfile -t targets < <(cargo +nightly fuzz list)
for target in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$target"
  echo "fuzz/ci.sh: $target for ${PER_TARGET} s"
  log="fuzz/corpus/$target.log"
  if ! cargo +nightly fuzz run "${FLAGS[@]}" "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
    -max_total_time="$PER_TARGET" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 > "$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz/ci.sh: $target failed; rerun: cargo +nightly fuzz run ${FLAGS[*]} $target fuzz/corpus/$target fuzz/seeds/$target" >&2
    exit 1
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec)|^#[0-9]+ +DONE' "$log" || true
done
echo "fuzz/ci.sh: ${#targets[@]} targets, $(( $(date +%s) - start )) s in all"

#!/usr/bin/env bash
# Runs every test eragate has, on a fresh machine too: installs what the tests need from the
# system (tests/system-deps.sh: Debian's packages as root, else one line naming them) and the
# pinned real peers (Python SDK, TypeScript SDK, server-everything, both conformance suites)
# into .cache/peers, then checks formatting and lints, runs unit, property and integration
# tests and the doc links, and checks the Dockerfile and deploy/ offline (tests/deploy.sh; the
# image itself: tests/container.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

tests/system-deps.sh
tests/peers/install.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Every cargo command below selects the whole workspace: features are unified over the packages
# a command selects (bench/ turns on num-traits' `default`), and a command on the root package
# alone would build eragate and its crypto crates a second time. Everything the tests run is
# built first in one command, so the benches compile while the big test binary does.
cargo test --workspace --lib --bins --tests --bench '*' --locked --no-run
cargo test --workspace --lib --bins --tests --locked -- --test-threads="${ERAGATE_TEST_THREADS:-3}"
# Criterion benches run once each, as a smoke test (their own harness takes no test flags).
# `--bench '*'`, not `--benches`, which would run the library's unit tests a second time.
cargo test --workspace --bench '*' --locked
cargo test --workspace --doc --locked
# Module docs link what they name: a broken intra-doc link is an error.
RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps --locked
tests/deploy.sh

#!/usr/bin/env bash
# Runs every test eragate has: installs the pinned real peers (Python SDK, TypeScript
# SDK, server-everything, both conformance suites) into .cache/peers, then checks
# formatting and lints, and runs unit, property and integration tests and the doc links, then checks the
# Dockerfile and deploy/ offline (tests/deploy.sh; the image itself: tests/container.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

tests/peers/install.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --lib --bins --tests --locked -- --test-threads="${ERAGATE_TEST_THREADS:-2}"
# Criterion benches run once each, as a smoke test (their own harness takes no test flags).
cargo test --benches --locked
cargo test --doc --locked
# Module docs link what they name: a broken intra-doc link is an error.
RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --locked
tests/deploy.sh

#!/usr/bin/env bash
# The tool-search benchmark end to end: install the servers (pinned), list their tools live,
# rank every query with eragate's ranker and a naive BM25, write bench/disclosure/RESULTS.md.
# Usage: bench/disclosure/run.sh [--tuning]   (--tuning: the tuning queries only, printed)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

"$HERE/install.sh"
python3 "$HERE/list_tools.py"
cd "$REPO"
cargo run --release --quiet --example disclosure_eval -- "$@"

#!/usr/bin/env bash
# Install the real MCP servers whose tools make the tool-search benchmark's catalogue, pinned,
# into ${ERAGATE_DISCLOSURE:-<repo>/.cache/disclosure}:
#   npm/    the npm servers below (install scripts skipped: no browser is downloaded; listing
#           tools needs none)
#   venv/   mcp-server-git, mcp-server-time, mcp-server-fetch from PyPI
# Idempotent: a stamp file holds the pins, so a second run returns at once.
# Needs python3 (>= 3.10) with venv, node (>= 20) + npm, and PyPI and the npm registry only.
# Usage: bench/disclosure/install.sh [--force]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
DIR="${ERAGATE_DISCLOSURE:-$REPO/.cache/disclosure}"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

# The servers of the issue's federation (issue 36), each at the newest version on the registry
# when the benchmark was written. Their entry points are in servers.json beside this file.
NPM_PKGS=(
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/server-github@2025.4.8"
  "@modelcontextprotocol/server-slack@2025.4.25"
  "@modelcontextprotocol/server-gitlab@2025.4.25"
  "@modelcontextprotocol/server-google-maps@0.6.2"
  "@playwright/mcp@0.0.86"
  "@notionhq/notion-mcp-server@2.5.2"
)
PY_PKGS=(
  "mcp-server-git==2026.10.19"
  "mcp-server-time==2026.10.19"
  "mcp-server-fetch==2026.10.24"
)
STAMP="$DIR/.installed"

log() { printf '[disclosure] %s\n' "$*" >&2; }

command -v python3 >/dev/null || { echo "install.sh: python3 not found" >&2; exit 1; }
command -v npm >/dev/null || { echo "install.sh: npm not found" >&2; exit 1; }

STAMP_CONTENT="$(
  printf 'layout=1\n'
  printf 'python=%s\n' "$(python3 -c 'import sys; print(sys.version.split()[0])')"
  printf 'npm=%s\n' "${NPM_PKGS[@]}"
  printf 'py=%s\n' "${PY_PKGS[@]}"
)"

if [[ $FORCE == 0 && -f "$STAMP" && "$(cat "$STAMP")" == "$STAMP_CONTENT" ]]; then
  echo "disclosure servers installed in $DIR"
  exit 0
fi

mkdir -p "$DIR"
# The cache is never committed.
[[ -f "$DIR/.gitignore" ]] || echo '*' > "$DIR/.gitignore"
exec 9>"$DIR/.lock"
flock 9

rm -f "$STAMP"
log "npm: ${NPM_PKGS[*]}"
mkdir -p "$DIR/npm"
[[ -f "$DIR/npm/package.json" ]] || echo '{"private":true}' > "$DIR/npm/package.json"
npm install --prefix "$DIR/npm" --no-audit --no-fund --ignore-scripts --loglevel=error \
  --save-exact "${NPM_PKGS[@]}" >&2

log "PyPI: ${PY_PKGS[*]}"
[[ -x "$DIR/venv/bin/python" ]] || python3 -m venv "$DIR/venv"
"$DIR/venv/bin/pip" install --quiet --disable-pip-version-check "${PY_PKGS[@]}" >&2

printf '%s\n' "$STAMP_CONTENT" > "$STAMP"
echo "disclosure servers installed in $DIR"

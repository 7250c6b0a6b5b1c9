#!/usr/bin/env bash
# What the tests need from the system, installed when missing (tests/run.sh runs this first):
#   python3 with venv      the peers' venv (tests/peers/install.sh) and the deploy tools' venv
#   node and npm           the peers installed from npm (they bring Node 22 themselves)
#   redis-server           started by tests/it/common/redis.rs for the rate limit, auth server storage
#                          and shared Redis tests
#   redis-cli              (redis-tools) makes the shared Redis tests' cluster and reads the auth
#                          server storage test's keys
#   chromium               /usr/bin/chromium, driven by playwright-core in tests/it/ops/status_page.rs
#                          and tests/it/auth/auth_server_pages.rs
#   clippy and rustfmt     tests/run.sh lints and checks formatting
# As root, Debian's packages are installed with apt-get (no service is started); otherwise the
# script stops at once with one line naming the packages to install. Everything else comes
# from crates.io, PyPI and npm, pinned, into .cache/.
set -euo pipefail

packages=()
command -v python3 >/dev/null || packages+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || packages+=(python3-venv)
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
command -v redis-server >/dev/null || packages+=(redis-server)
command -v redis-cli >/dev/null || packages+=(redis-tools)
[[ -x /usr/bin/chromium ]] || packages+=(chromium)

if ((${#packages[@]})); then
  if ((EUID != 0)) || ! command -v apt-get >/dev/null; then
    echo "tests/system-deps.sh: the tests need ${packages[*]}: install them as root (apt-get install ${packages[*]})" >&2
    exit 1
  fi
  echo "tests/system-deps.sh: installing ${packages[*]} from Debian's packages" >&2
  # Installing redis-server must not start a server of its own: the tests start theirs.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
  fi
  status=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"; } || status=$?
  ((own_policy == 0)) || rm -f "$policy"
  ((status == 0)) || { echo "tests/system-deps.sh: apt-get install ${packages[*]} failed" >&2; exit "$status"; }
fi

command -v cargo >/dev/null || { echo "tests/system-deps.sh: the tests need cargo (https://rustup.rs)" >&2; exit 1; }
components=()
cargo clippy --version >/dev/null 2>&1 || components+=(clippy)
cargo fmt --version >/dev/null 2>&1 || components+=(rustfmt)
if ((${#components[@]})); then
  command -v rustup >/dev/null || { echo "tests/system-deps.sh: the tests need ${components[*]} (rustup component add ${components[*]})" >&2; exit 1; }
  rustup component add "${components[@]}" \
    || { echo "tests/system-deps.sh: the tests need ${components[*]}; rustup could not add them" >&2; exit 1; }
fi

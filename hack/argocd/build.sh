#!/usr/bin/env bash
# Builds hack/argocd (Argo CD's health-script VM: gopher-lua with the libraries Argo CD opens) into
# ~/.cache/kvpilot/argocd-health/<source hash>/argocd-health; only the Go module proxy is needed.
# Prints the binary's path on stdout; progress goes to stderr. Honours KVPILOT_ARGOCD_HEALTH.
set -euo pipefail
if [[ -n "${KVPILOT_ARGOCD_HEALTH:-}" ]]; then
  echo "${KVPILOT_ARGOCD_HEALTH}"
  exit 0
fi
src="$(cd "$(dirname "$0")" && pwd)"
# The same key tests/argocd_vm.py computes: a changed source builds afresh.
key=$(cat "${src}/go.mod" "${src}/go.sum" "${src}/main.go" | sha256sum | cut -c1-12)
dest="${HOME}/.cache/kvpilot/argocd-health/${key}"
if [[ -x "${dest}/argocd-health" ]]; then
  echo "${dest}/argocd-health"
  exit 0
fi
command -v go >/dev/null || { echo "error: go is not on PATH; the Argo CD health VM is built from Go modules" >&2; exit 1; }
echo "building the Argo CD health-script VM (gopher-lua) into ${dest}" >&2
mkdir -p "${dest}"
(cd "${src}" && CGO_ENABLED=0 go build -trimpath -o "${dest}/argocd-health.tmp" .)
mv "${dest}/argocd-health.tmp" "${dest}/argocd-health"
echo "${dest}/argocd-health"

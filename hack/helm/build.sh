#!/usr/bin/env bash
# Builds the Helm CLI from its Go module (helm.sh/helm/v3) into ~/.cache/kvpilot/helm/<version>/helm,
# the way hack/envtest/build.sh builds the control plane: only the Go module proxy is needed.
# Prints the binary's path on stdout; progress goes to stderr. Honours KVPILOT_HELM (a helm binary to use).
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
if [[ -n "${KVPILOT_HELM:-}" ]]; then
  echo "using KVPILOT_HELM=${KVPILOT_HELM}" >&2
  echo "${KVPILOT_HELM}"
  exit 0
fi
dest="${HOME}/.cache/kvpilot/helm/${HELM_VERSION}"
if [[ -x "${dest}/helm" && -f "${dest}/.complete" ]]; then
  echo "helm ${HELM_VERSION} already built in ${dest}" >&2
  echo "${dest}/helm"
  exit 0
fi
command -v go >/dev/null || { echo "error: go is not on PATH; Helm is built from its Go module" >&2; exit 1; }
mkdir -p "${dest}"
echo "building helm ${HELM_VERSION} from helm.sh/helm/v3 (a few minutes on 2 cores; cached afterwards)" >&2
start=$(date +%s)
# `helm template` and `helm lint` assume the Kubernetes version of the client-go Helm was built with;
# stamp it in as Helm's own release build does, or they assume 1.20 and refuse charts needing newer.
gomod=$(go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
k8s_minor=$(awk '$1 == "k8s.io/client-go" {split($2, v, "."); print v[2]; exit}' "${gomod}")
pkg=helm.sh/helm/v3
GOBIN="${dest}" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath \
  -ldflags "-s -w -X ${pkg}/internal/version.version=${HELM_VERSION} \
    -X ${pkg}/pkg/chartutil.k8sVersionMajor=1 -X ${pkg}/pkg/chartutil.k8sVersionMinor=${k8s_minor} \
    -X ${pkg}/pkg/lint/rules.k8sVersionMajor=1 -X ${pkg}/pkg/lint/rules.k8sVersionMinor=${k8s_minor}" \
  "${pkg}/cmd/helm@${HELM_VERSION}" >&2
touch "${dest}/.complete"
echo "built helm ${HELM_VERSION} (Kubernetes 1.${k8s_minor} defaults) in $(( $(date +%s) - start )) s" >&2
echo "${dest}/helm"

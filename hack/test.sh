#!/usr/bin/env bash
# The test command: installs kvpilot with its test extras, builds (or reuses) the local control plane
# and the Helm CLI the integration tests run against, and runs the whole suite.  `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing kvpilot[test]"
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [ -z "${KVPILOT_TEST_KUBECONFIG:-}" ]; then
  echo "== control-plane binaries (built from Go modules once, ~10 min on 2 cores; cached in ~/.cache/kvpilot)"
  bash hack/envtest/build.sh >/dev/null
fi
echo "== helm (built from its Go module once, ~7 min on 2 cores; cached in ~/.cache/kvpilot)"
bash hack/helm/build.sh >/dev/null

echo "== Argo CD's health-script VM (gopher-lua, built from its Go module once, seconds; cached in ~/.cache/kvpilot)"
bash hack/argocd/build.sh >/dev/null

echo "== pytest"
set +e
python3 -m pytest "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$code"

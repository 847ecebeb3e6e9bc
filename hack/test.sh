#!/usr/bin/env bash
# The test command: installs kvpilot with its test extras, builds (or reuses) the local control plane
# the integration tests run against, and runs the whole suite.  `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing kvpilot[test]"
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [ -z "${KVPILOT_TEST_KUBECONFIG:-}" ] && [ -x hack/envtest/build.sh ]; then
  echo "== control plane binaries (cached under ~/.cache/kvpilot/envtest; first build takes a while)"
  KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/envtest/build.sh | tail -n 1)}"
  export KUBEBUILDER_ASSETS
fi

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

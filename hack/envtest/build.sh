#!/usr/bin/env bash
# Build the control-plane binaries used by tests/integration:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
# (from this wrapper module, see README.md) and kwok (go install).
#
# Output: ${KVPILOT_CACHE:-~/.cache/kvpilot}/envtest/<k8s-version>/
# The build is skipped when that directory already holds every binary and its
# stamp file matches the current inputs (go.mod, go.sum, cmd/, Go, kwok).
# If KUBEBUILDER_ASSETS points at a directory with etcd and kube-apiserver,
# nothing is built and that directory is used instead.
#
# Progress goes to stderr; the binary directory is the last line of stdout, so
#   export KUBEBUILDER_ASSETS=$(hack/envtest/build.sh)
# works. Knobs: KWOK_VERSION (default v0.8.0), GO (go binary),
# KVPILOT_BUILD_PARALLEL (go build -p; set 1 if the linker is OOM-killed),
# KVPILOT_FORCE_BUILD=1 (ignore the stamp).
set -euo pipefail

export GOTOOLCHAIN=local CGO_ENABLED=0
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kwok_version=${KWOK_VERSION:-v0.8.0}
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

t0=$(date +%s)
log() { printf '[%s +%4ss] %s\n' "$(date +%H:%M:%S)" "$(( $(date +%s) - t0 ))" "$*" >&2; }

if [[ -n ${KUBEBUILDER_ASSETS:-} && -x $KUBEBUILDER_ASSETS/etcd && -x $KUBEBUILDER_ASSETS/kube-apiserver ]]; then
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS already has etcd and kube-apiserver; nothing to build"
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' "$here/go.mod")
[[ -n $k8s_version ]] || { echo "cannot find the k8s.io/kubernetes version in $here/go.mod" >&2; exit 1; }
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$here/go.mod")
minor=${k8s_version#v1.}; minor=${minor%%.*}

out=${KVPILOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot}/envtest/$k8s_version
stamp_file=$out/.stamp
stamp=$(
  echo "k8s=$k8s_version etcd=$etcd_version kwok=$kwok_version"
  "$GO" env GOVERSION GOOS GOARCH
  cd "$here" && cat go.mod go.sum cmd/*/main.go build.sh | sha256sum
)

have_all() {
  local b
  for b in "${binaries[@]}"; do [[ -x $out/$b ]] || return 1; done
}
if [[ ${KVPILOT_FORCE_BUILD:-0} != 1 ]] && have_all && [[ -f $stamp_file && $(<"$stamp_file") == "$stamp" ]]; then
  log "up to date: $out (k8s $k8s_version, etcd $etcd_version, kwok $kwok_version)"
  echo "$out"
  exit 0
fi

log "building k8s $k8s_version + etcd $etcd_version + kwok $kwok_version with $("$GO" env GOVERSION) into $out"
mkdir -p "$out"
rm -f "$stamp_file"
staging=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$staging"' EXIT

# buildDate from the proxy's .info time of the release keeps builds reproducible.
info=$(cd "$here" && "$GO" mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/^[[:space:]]*"Info": "\(.*\)",*$/\1/p')
build_date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)
build_date=${build_date:-1970-01-01T00:00:00Z}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

log "step 1/3: go mod download (wrapper module)"
(cd "$here" && "$GO" mod download)

log "step 2/3: go build ./cmd/... (etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)"
build_args=(-trimpath -ldflags "$ldflags" -o "$staging/")
[[ -n ${KVPILOT_BUILD_PARALLEL:-} ]] && build_args=(-p "$KVPILOT_BUILD_PARALLEL" "${build_args[@]}")
(cd "$here" && "$GO" build "${build_args[@]}" ./cmd/...)
log "step 2/3 done"

log "step 3/3: go install sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
(cd "$staging" && GOBIN=$staging GOFLAGS=-buildvcs=false "$GO" install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version")
log "step 3/3 done"

for b in "${binaries[@]}"; do
  [[ -x $staging/$b ]] || { echo "build did not produce $b" >&2; exit 1; }
  mv -f "$staging/$b" "$out/$b"
done
printf '%s\n' "$stamp" > "$stamp_file"
log "$("$out/kube-apiserver" --version 2>&1), etcd $("$out/etcd" --version 2>/dev/null | sed -n 's/^etcd Version: //p'), $("$out/kwok" --version 2>&1 | head -1)"
log "total build time: $(( $(date +%s) - t0 ))s"
echo "$out"

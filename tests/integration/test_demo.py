"""The README's first command: `kvpilot demo` brings up a cluster, the operator and an example."""

from __future__ import annotations

import signal
import subprocess
import sys

from kvpilot.localcluster.controlplane import ControlPlane


def test_demo_runs_end_to_end(control_plane: ControlPlane) -> None:
    # control_plane is requested only so the suite skips (with its reason) when binaries are absent;
    # the demo starts a cluster of its own, exactly as a newcomer's run does.
    demo = subprocess.Popen(
        [sys.executable, "-m", "kvpilot", "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = demo.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        # Ctrl-C, as a user would: the demo then stops its etcd, API server and operator, which run in
        # sessions of their own and would otherwise load every later test.
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=60)
        raise AssertionError("kvpilot demo did not finish within 300 s\n" + out + err) from None
    assert demo.returncode == 0, out + err
    assert "Ready after" in out
    assert "AllReplicasReady" in out
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct" in out
    assert "pod/llama-31-8b-" in out and "Running" in out

"""The README's first command: `kvpilot demo` brings up a cluster, the operator and an example."""

from __future__ import annotations

import subprocess
import sys

from kvpilot.localcluster.controlplane import ControlPlane


def test_demo_runs_end_to_end(control_plane: ControlPlane) -> None:
    # control_plane is requested only so the suite skips (with its reason) when binaries are absent;
    # the demo starts a cluster of its own, exactly as a newcomer's run does.
    result = subprocess.run(
        [sys.executable, "-m", "kvpilot", "demo"], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Ready after" in out
    assert "AllReplicasReady" in out
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct" in out
    assert "pod/llama-31-8b-" in out and "Running" in out

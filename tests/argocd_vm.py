"""Run an Argo CD health script in the VM Argo CD itself embeds (hack/argocd, built by hack/argocd/build.sh)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "hack" / "argocd"
BUILD_COMMAND = "bash hack/argocd/build.sh"


def binary() -> Path | None:
    """The built VM for the current source (the key hack/argocd/build.sh uses), or None."""
    if os.environ.get("KVPILOT_ARGOCD_HEALTH"):
        return Path(os.environ["KVPILOT_ARGOCD_HEALTH"])
    digest = hashlib.sha256(b"".join((SOURCE / name).read_bytes() for name in ("go.mod", "go.sum", "main.go")))
    built = Path.home() / ".cache" / "kvpilot" / "argocd-health" / digest.hexdigest()[:12] / "argocd-health"
    return built if built.exists() else None


def required() -> Path:
    """The built VM, or skip the calling test saying how to build it."""
    vm = binary()
    if vm is None:
        pytest.skip(f"Argo CD's health-script VM is not built: run `{BUILD_COMMAND}` (hack/test.sh does)")
    return vm


def judge(vm: Path, script: Path, objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Argo CD's verdict per object: {"status", "message"}, or {"error"} where Argo CD would fail the check."""
    result = subprocess.run(
        [str(vm), str(script)], input=json.dumps(objects), capture_output=True, text=True, timeout=60, check=True
    )
    return [json.loads(line) for line in result.stdout.splitlines()]

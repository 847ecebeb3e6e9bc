"""The Argo CD health check (examples/argocd/health.lua) run by a real Lua runtime (lupa) on status
objects made by kvpilot's own status code, the one the operator writes with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kvpilot.errors import SpecError
from kvpilot.status import Observation, compute_status

from .test_status import T0, child, rendered

lupa = pytest.importorskip("lupa", reason="lupa (a Lua runtime) is in the test extras: pip install -e .[test]")

ARGOCD = Path(__file__).resolve().parents[2] / "examples" / "argocd"
SCRIPT = (ARGOCD / "health.lua").read_text()


def health(obj: dict[str, Any]) -> tuple[str, str]:
    runtime = lupa.LuaRuntime(unpack_returned_tuples=True)

    def to_lua(value: Any) -> Any:
        if isinstance(value, dict):
            return runtime.table_from({k: to_lua(v) for k, v in value.items()})
        if isinstance(value, list):
            return runtime.table_from([to_lua(v) for v in value])
        return value

    # Argo CD runs the script with the object bound to `obj`.
    result = runtime.eval(f"function(obj) {SCRIPT} end")(to_lua(obj))
    return result["status"], result["message"]


def llmd(generation: int, **observation: Any) -> dict[str, Any]:
    observation.setdefault("desired_replicas", 1)
    status = compute_status(Observation(generation=generation, now=T0, **observation))
    return {"metadata": {"name": "a", "namespace": "ns", "generation": generation}, "status": status.wire()}


def test_ready_and_current_is_healthy() -> None:
    assert health(llmd(1, rendered=rendered(), child=child()))[0] == "Healthy"


def test_status_for_an_older_generation_is_progressing() -> None:
    obj = llmd(1, rendered=rendered(), child=child())
    obj["metadata"]["generation"] = 2
    status, message = health(obj)
    assert status == "Progressing" and "generation 2" in message


def test_no_status_yet_is_progressing() -> None:
    assert health({"metadata": {"generation": 1}})[0] == "Progressing"


def test_rolling_out_and_scaling_are_progressing() -> None:
    status, message = health(
        llmd(
            1,
            rendered=rendered(2),
            desired_replicas=2,
            child=child(spec_replicas=2, replicas=2, ready_replicas=1, available_replicas=1),
        )
    )
    assert status == "Progressing" and message


def test_invalid_spec_is_degraded_with_the_field() -> None:
    error = SpecError("maxModelLen 999999 exceeds the model's context", path="spec.engine.maxModelLen")
    status, message = health(llmd(1, spec_error=error))
    assert status == "Degraded" and "spec.engine.maxModelLen" in message


def test_stalled_rollout_is_degraded() -> None:
    stuck = child(ready_replicas=0, available_replicas=0, progress_deadline_exceeded=True)
    status, message = health(llmd(1, rendered=rendered(), child=stuck))
    assert status == "Degraded" and "ProgressDeadlineExceeded" in message


def test_the_argocd_cm_snippet_carries_the_same_script() -> None:
    cm = yaml.safe_load((ARGOCD / "argocd-cm-health.yaml").read_text())
    assert cm["data"]["resource.customizations.health.kvpilot.io_LLMDeployment"] == SCRIPT

"""The Argo CD health check (examples/argocd/health.lua) on status objects made by kvpilot's own status
code, the one the operator writes with, run twice: by a plain Lua runtime (lupa) and by the VM Argo CD
itself embeds (gopher-lua with only the libraries Argo CD opens: no string or math library)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvpilot.errors import SpecError
from kvpilot.status import Observation, compute_status
from tests import argocd_vm

from .test_status import T0, child, rendered

ARGOCD = Path(__file__).resolve().parents[2] / "examples" / "argocd"
SCRIPT_PATH = ARGOCD / "health.lua"
SCRIPT = SCRIPT_PATH.read_text()

Health = Callable[[dict[str, Any]], tuple[str, str]]


def lupa_health(obj: dict[str, Any]) -> tuple[str, str]:
    lupa = pytest.importorskip("lupa", reason="lupa (a Lua runtime) is in the test extras: pip install -e .[test]")
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


def argocd_vm_health(obj: dict[str, Any]) -> tuple[str, str]:
    vm = argocd_vm.required()
    [verdict] = argocd_vm.judge(vm, SCRIPT_PATH, [obj])
    assert "error" not in verdict, verdict
    return verdict["status"], verdict["message"]


@pytest.fixture(params=[lupa_health, argocd_vm_health], ids=["lupa", "argocd-vm"])
def health(request: pytest.FixtureRequest) -> Health:
    return request.param  # type: ignore[no-any-return]


def llmd(generation: int, **observation: Any) -> dict[str, Any]:
    observation.setdefault("desired_replicas", 1)
    status = compute_status(Observation(generation=generation, now=T0, **observation))
    return {"metadata": {"name": "a", "namespace": "ns", "generation": generation}, "status": status.wire()}


def test_ready_and_current_is_healthy(health: Health) -> None:
    assert health(llmd(1, rendered=rendered(), child=child()))[0] == "Healthy"


def test_status_for_an_older_generation_is_progressing(health: Health) -> None:
    obj = llmd(1, rendered=rendered(), child=child())
    obj["metadata"]["generation"] = 2
    status, message = health(obj)
    assert status == "Progressing" and "generation 2" in message


def test_no_status_yet_is_progressing(health: Health) -> None:
    assert health({"metadata": {"generation": 1}})[0] == "Progressing"


def test_rolling_out_and_scaling_are_progressing(health: Health) -> None:
    status, message = health(
        llmd(
            1,
            rendered=rendered(2),
            desired_replicas=2,
            child=child(spec_replicas=2, replicas=2, ready_replicas=1, available_replicas=1),
        )
    )
    assert status == "Progressing" and message


def test_invalid_spec_is_degraded_with_the_field(health: Health) -> None:
    error = SpecError("maxModelLen 999999 exceeds the model's context", path="spec.engine.maxModelLen")
    status, message = health(llmd(1, spec_error=error))
    assert status == "Degraded" and "spec.engine.maxModelLen" in message


def test_stalled_rollout_is_degraded(health: Health) -> None:
    stuck = child(ready_replicas=0, available_replicas=0, progress_deadline_exceeded=True)
    status, message = health(llmd(1, rendered=rendered(), child=stuck))
    assert status == "Degraded" and "ProgressDeadlineExceeded" in message


def test_the_argocd_cm_snippet_carries_the_same_script() -> None:
    cm = yaml.safe_load((ARGOCD / "argocd-cm-health.yaml").read_text())
    assert cm["data"]["resource.customizations.health.kvpilot.io_LLMDeployment"] == SCRIPT


def test_the_argocd_vm_opens_only_what_argo_cd_opens(tmp_path: Path) -> None:
    vm = argocd_vm.required()
    uses_string = tmp_path / "uses_string.lua"
    uses_string.write_text('hs = {}\nhs.status = string.format("%s", "Healthy")\nreturn hs\n')
    bad_status = tmp_path / "bad_status.lua"
    bad_status.write_text('return {status = "Fine", message = "no such code"}\n')
    [no_string] = argocd_vm.judge(vm, uses_string, [{}])
    [not_a_code] = argocd_vm.judge(vm, bad_status, [{}])
    assert "format" in no_string["error"]
    assert "invalid health status" in not_a_code["error"]

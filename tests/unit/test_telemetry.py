"""The operator's own metrics: a deleted LLMDeployment leaves no series behind, others keep theirs."""

from __future__ import annotations

from prometheus_client import generate_latest

from kvpilot import telemetry
from kvpilot.api.v1alpha1 import Condition, LLMDeploymentStatus


def _series_of(namespace: str, name: str) -> list[str]:
    text = generate_latest(telemetry.REGISTRY).decode()
    tag = f'llmdeployment="{name}",namespace="{namespace}"'
    alt = f'namespace="{namespace}",llmdeployment="{name}"'
    return [line for line in text.splitlines() if not line.startswith("#") and (tag in line or alt in line)]


def _status(*types: str) -> LLMDeploymentStatus:
    conditions = [
        Condition(type=t, status="True", reason="Test", last_transition_time="2026-11-29T00:00:00Z") for t in types
    ]
    return LLMDeploymentStatus(conditions=conditions, ready_replicas=1, desired_replicas=2)


def test_forget_object_removes_every_series_of_that_object_only() -> None:
    telemetry.observe_object("tele", "gone", None, _status("Ready", "SpecValid", "Degraded"))
    telemetry.count_decision("tele", "gone", "up")
    telemetry.count_decision("tele", "gone", "hold")
    telemetry.observe_object("tele", "kept", None, _status("Ready"))
    telemetry.count_decision("tele", "kept", "down")
    gone = _series_of("tele", "gone")
    assert any("kvpilot_llmdeployment_condition" in s and 'type="Degraded"' in s for s in gone)
    assert any("kvpilot_autoscaler_decisions_total" in s and 'action="hold"' in s for s in gone)

    telemetry.forget_object("tele", "gone")

    assert _series_of("tele", "gone") == []
    kept = _series_of("tele", "kept")
    assert any('type="Ready"' in s for s in kept) and any('action="down"' in s for s in kept)
    telemetry.forget_object("tele", "gone")  # twice is harmless
    telemetry.forget_object("tele", "kept")
    assert _series_of("tele", "kept") == []

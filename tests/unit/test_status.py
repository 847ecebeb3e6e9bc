"""Conditions, status and events: pure functions of what was observed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kvpilot.api.v1alpha1 import LLMDeploymentStatus
from kvpilot.errors import DoesNotFitError, Fix, SpecError
from kvpilot.handlers import _status_patch, desired_replicas, plain
from kvpilot.pipeline import render_all
from kvpilot.render.objects import RenderContext
from kvpilot.status import ChildDeployment, Observation, compute_status, condition, events_for

from .helpers import spec

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def rendered(replicas: int = 1):  # type: ignore[no-untyped-def]
    return render_all(spec(), RenderContext("a", "ns", replicas))


def child(**kw: int) -> ChildDeployment:
    base = dict(
        generation=1,
        observed_generation=1,
        spec_replicas=1,
        replicas=1,
        ready_replicas=1,
        updated_replicas=1,
        available_replicas=1,
    )
    base.update(kw)
    return ChildDeployment(**base)  # type: ignore[arg-type]


def status_of(**kw):  # type: ignore[no-untyped-def]
    kw.setdefault("generation", 1)
    kw.setdefault("now", T0)
    kw.setdefault("desired_replicas", 1)
    return compute_status(Observation(**kw))


def cond(st: LLMDeploymentStatus, ctype: str) -> tuple[str, str]:
    c = condition(st, ctype)
    assert c is not None
    return c.status, c.reason


def test_all_ready() -> None:
    st = status_of(rendered=rendered(), child=child())
    assert cond(st, "Ready") == ("True", "AllReplicasReady")
    assert cond(st, "Progressing") == ("False", "Complete")
    assert cond(st, "Degraded") == ("False", "AsExpected")
    assert cond(st, "SpecValid")[0] == "True"
    assert st.observed_generation == 1 and st.ready_replicas == 1
    assert st.endpoint == "http://a.ns.svc:8000/v1"
    assert all(c.observed_generation == 1 for c in st.conditions)


def test_rolling_out_and_missing() -> None:
    st = status_of(rendered=rendered(), child=child(generation=2, observed_generation=1))
    assert cond(st, "Ready") == ("False", "ReplicasNotReady")
    assert cond(st, "Progressing") == ("True", "RollingOut")
    st = status_of(rendered=rendered(), child=None)
    assert cond(st, "Ready") == ("False", "DeploymentMissing")


def test_scaling_and_zero() -> None:
    st = status_of(
        rendered=rendered(3),
        child=child(spec_replicas=3, replicas=3, updated_replicas=3, ready_replicas=1),
        desired_replicas=3,
    )
    assert cond(st, "Ready") == ("False", "ReplicasNotReady")
    assert cond(st, "Progressing")[0] == "True"
    st = status_of(
        rendered=rendered(0),
        child=child(spec_replicas=0, replicas=0, updated_replicas=0, ready_replicas=0),
        desired_replicas=0,
    )
    assert cond(st, "Ready") == ("True", "ScaledToZero")


def test_stuck_rollout_is_degraded() -> None:
    st = status_of(
        rendered=rendered(),
        child=ChildDeployment(
            generation=2,
            observed_generation=2,
            spec_replicas=1,
            replicas=2,
            updated_replicas=1,
            progress_deadline_exceeded=True,
        ),
    )
    assert cond(st, "Degraded") == ("True", "ProgressDeadlineExceeded")
    assert cond(st, "Progressing") == ("False", "ProgressDeadlineExceeded")


def test_invalid_spec_keeps_the_last_good_plan_and_names_the_fix() -> None:
    good = status_of(rendered=rendered(), child=child())
    error = DoesNotFitError("too big", path="spec.resources", fixes=[Fix("a bigger GPU", "TP 8, 100 KV tokens")])
    bad = status_of(generation=2, spec_error=error, child=child(), previous=good, now=T0 + timedelta(minutes=1))
    assert cond(bad, "SpecValid") == ("False", "DoesNotFit")
    assert "a bigger GPU (TP 8, 100 KV tokens)" in (condition(bad, "SpecValid").message)  # type: ignore[union-attr]
    assert cond(bad, "Degraded") == ("True", "SpecInvalid")
    assert bad.plan == good.plan and bad.vllm_args == good.vllm_args  # nothing lost
    assert "keeps serving 1 ready replicas" in condition(bad, "Ready").message  # type: ignore[union-attr]
    assert bad.observed_generation == 2


def test_transition_time_moves_only_on_flips() -> None:
    first = status_of(rendered=rendered(), child=child())
    later = status_of(rendered=rendered(), child=child(), previous=first, now=T0 + timedelta(hours=1))
    assert later == first  # identical: nothing to write
    flipped = status_of(rendered=rendered(), child=child(ready_replicas=0), previous=first, now=T0 + timedelta(hours=2))
    ready = condition(flipped, "Ready")
    spec_valid = condition(flipped, "SpecValid")
    assert ready is not None and ready.last_transition_time == "2026-11-29T14:00:00Z"
    assert spec_valid is not None and spec_valid.last_transition_time == "2026-11-29T12:00:00Z"


def test_other_conditions_are_kept() -> None:
    first = status_of(rendered=rendered(), child=child())
    with_metrics = first.model_copy(
        update={"conditions": [*first.conditions, first.conditions[0].model_copy(update={"type": "MetricsAvailable"})]}
    )
    again = status_of(rendered=rendered(), child=child(), previous=with_metrics)
    assert [c.type for c in again.conditions][-1] == "MetricsAvailable"


def test_events_only_on_change() -> None:
    first = status_of(rendered=rendered(), child=None)
    notes = events_for(LLMDeploymentStatus(), first, created=True)
    assert [n.reason for n in notes] == ["Planned", "Applied"]
    assert events_for(first, first, created=False) == []
    bad = status_of(spec_error=SpecError("nope", path="spec.x"), child=None, previous=first)
    assert [(n.type, n.reason) for n in events_for(first, bad, created=False)] == [("Warning", "InvalidSpec")]
    ready = status_of(rendered=rendered(), child=child(), previous=first)
    assert ("Normal", "Ready") in [(n.type, n.reason) for n in events_for(first, ready, created=False)]
    scaled = status_of(rendered=rendered(2), child=child(), previous=ready, desired_replicas=2)
    assert any(n.reason == "Scaled" and "1 → 2" in n.message for n in events_for(ready, scaled, created=False))


def test_desired_replicas() -> None:
    assert desired_replicas(spec(replicas=3), None) == 3
    auto = spec(autoscaling={"enabled": True, "minReplicas": 2, "maxReplicas": 5})
    assert desired_replicas(auto, None) == 2
    assert desired_replicas(auto, child(spec_replicas=9)) == 5
    assert desired_replicas(auto, child(spec_replicas=4)) == 4


def test_status_patch_removes_dropped_keys_and_plain_copies() -> None:
    assert _status_patch({"a": 1, "b": 2}, {"a": 3}) == {"b": None, "a": 3}
    assert plain({"x": ({"y": 1},)}) == {"x": [{"y": 1}]}


def test_status_patch_nulls_nested_keys() -> None:
    before = {"metrics": {"kvCacheUsagePercent": 50, "requestsRunning": 8}, "replicas": 2}
    assert _status_patch(before, {"metrics": {}, "replicas": 2}) == {
        "metrics": {"kvCacheUsagePercent": None, "requestsRunning": None},
        "replicas": 2,
    }

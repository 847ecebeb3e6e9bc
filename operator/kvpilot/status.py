"""Conditions and status, computed purely from what was observed (cert-manager style: gather, then decide).

Condition types and reasons are documented constants; a condition's lastTransitionTime moves only when
its status flips, so a steady object produces an identical status and the operator writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kvpilot.api.v1alpha1 import Condition, LLMDeploymentStatus, MetricsStatus, ScaleEvent
from kvpilot.errors import DoesNotFitError, SpecError
from kvpilot.pipeline import Rendered


class ConditionType:
    READY = "Ready"  # every desired replica runs the current spec and passes its readiness probe
    PROGRESSING = "Progressing"  # a rollout or scale is under way
    DEGRADED = "Degraded"  # something needs a person: invalid spec, a stuck rollout, a failed apply
    SPEC_VALID = "SpecValid"  # the spec was planned and rendered without error


class Reason:
    # SpecValid
    PLANNED = "Planned"
    INVALID_SPEC = "InvalidSpec"
    DOES_NOT_FIT = "DoesNotFit"
    UNSUPPORTED_FLAG = "UnsupportedFlag"
    UNKNOWN_MODEL_OR_GPU = "UnknownModelOrGPU"
    # Ready / Progressing / Degraded
    ALL_REPLICAS_READY = "AllReplicasReady"
    SCALED_TO_ZERO = "ScaledToZero"
    REPLICAS_NOT_READY = "ReplicasNotReady"
    DEPLOYMENT_MISSING = "DeploymentMissing"
    ROLLING_OUT = "RollingOut"
    SCALING = "Scaling"
    COMPLETE = "Complete"
    PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
    SPEC_INVALID = "SpecInvalid"
    APPLY_FAILED = "ApplyFailed"
    AS_EXPECTED = "AsExpected"


@dataclass(frozen=True)
class ChildDeployment:
    """What the operator saw of the vLLM Deployment it manages."""

    generation: int = 0
    observed_generation: int = 0
    spec_replicas: int = 0
    replicas: int = 0
    ready_replicas: int = 0
    updated_replicas: int = 0
    available_replicas: int = 0
    progress_deadline_exceeded: bool = False

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> ChildDeployment:
        status = obj.get("status") or {}
        conditions = status.get("conditions") or []
        deadline = any(
            c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded" for c in conditions
        )
        return cls(
            generation=int(obj.get("metadata", {}).get("generation") or 0),
            observed_generation=int(status.get("observedGeneration") or 0),
            spec_replicas=int((obj.get("spec") or {}).get("replicas") or 0),
            replicas=int(status.get("replicas") or 0),
            ready_replicas=int(status.get("readyReplicas") or 0),
            updated_replicas=int(status.get("updatedReplicas") or 0),
            available_replicas=int(status.get("availableReplicas") or 0),
            progress_deadline_exceeded=deadline,
        )


@dataclass(frozen=True)
class Observation:
    """Everything the status depends on; built by the handler, judged here."""

    generation: int
    now: datetime
    desired_replicas: int
    spec_error: SpecError | None = None
    rendered: Rendered | None = None
    child: ChildDeployment | None = None
    apply_error: str | None = None
    previous: LLMDeploymentStatus = field(default_factory=LLMDeploymentStatus)


def _spec_reason(error: SpecError) -> str:
    return {
        "DoesNotFit": Reason.DOES_NOT_FIT,
        "UnsupportedFlag": Reason.UNSUPPORTED_FLAG,
        "UnknownModelOrGPU": Reason.UNKNOWN_MODEL_OR_GPU,
    }.get(error.reason, Reason.INVALID_SPEC)


def spec_error_message(error: SpecError) -> str:
    message = "; ".join(str(i) for i in error.issues)
    if isinstance(error, DoesNotFitError) and error.fixes:
        message += " Fixes, in order: " + "; ".join(f"{f.title} ({f.detail})" for f in error.fixes)
    return message


def _judge(obs: Observation) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) for each condition."""
    out: list[tuple[str, str, str, str]] = []
    if obs.spec_error is not None:
        message = spec_error_message(obs.spec_error)
        out.append((ConditionType.SPEC_VALID, "False", _spec_reason(obs.spec_error), message))
    else:
        plan = obs.rendered.plan if obs.rendered else None
        detail = (
            f"{plan.gpus_per_replica} × {plan.gpu_type} per replica (TP {plan.tensor_parallel_size}), "
            f"{plan.kv_cache_tokens:,} KV tokens, {plan.max_concurrency:.1f} concurrent sequences"
            if plan
            else "planned"
        )
        out.append((ConditionType.SPEC_VALID, "True", Reason.PLANNED, detail))

    child, desired = obs.child, obs.desired_replicas
    serving = f"; the previous revision keeps serving {child.ready_replicas} ready replicas" if child else ""
    if obs.spec_error is not None:
        out.append((ConditionType.READY, "False", Reason.SPEC_INVALID, "the spec is invalid (see SpecValid)" + serving))
        out.append(
            (ConditionType.PROGRESSING, "False", Reason.SPEC_INVALID, "nothing is rolled out from an invalid spec")
        )
        out.append(
            (ConditionType.DEGRADED, "True", Reason.SPEC_INVALID, "the spec is invalid (see SpecValid)" + serving)
        )
        return out
    if obs.apply_error is not None:
        out.append((ConditionType.DEGRADED, "True", Reason.APPLY_FAILED, obs.apply_error))
    if child is None:
        out.append((ConditionType.READY, "False", Reason.DEPLOYMENT_MISSING, "the vLLM Deployment does not exist yet"))
        out.append((ConditionType.PROGRESSING, "True", Reason.ROLLING_OUT, "creating the vLLM Deployment"))
        if obs.apply_error is None:
            out.append((ConditionType.DEGRADED, "False", Reason.AS_EXPECTED, ""))
        return out

    current = child.observed_generation >= child.generation
    rolled = current and child.updated_replicas >= desired and child.replicas <= desired
    ready = f"{child.ready_replicas}/{desired} replicas ready"
    if desired == 0 and rolled and child.replicas == 0:
        out.append((ConditionType.READY, "True", Reason.SCALED_TO_ZERO, "scaled to zero replicas"))
    elif rolled and child.ready_replicas >= desired:
        out.append((ConditionType.READY, "True", Reason.ALL_REPLICAS_READY, ready))
    else:
        out.append((ConditionType.READY, "False", Reason.REPLICAS_NOT_READY, ready))

    if child.progress_deadline_exceeded:
        out.append((ConditionType.PROGRESSING, "False", Reason.PROGRESS_DEADLINE_EXCEEDED, f"rollout stalled: {ready}"))
        if obs.apply_error is None:
            out.append((ConditionType.DEGRADED, "True", Reason.PROGRESS_DEADLINE_EXCEEDED, f"rollout stalled: {ready}"))
        return out
    if not rolled:
        out.append((ConditionType.PROGRESSING, "True", Reason.ROLLING_OUT, f"rolling out: {ready}"))
    elif child.ready_replicas != desired or child.replicas != desired:
        out.append((ConditionType.PROGRESSING, "True", Reason.SCALING, f"scaling to {desired}: {ready}"))
    else:
        out.append((ConditionType.PROGRESSING, "False", Reason.COMPLETE, ready))
    if obs.apply_error is None:
        out.append((ConditionType.DEGRADED, "False", Reason.AS_EXPECTED, ""))
    return out


def compute_conditions(obs: Observation) -> list[Condition]:
    previous = {c.type: c for c in obs.previous.conditions}
    stamp = obs.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = []
    for ctype, status, reason, message in _judge(obs):
        before = previous.get(ctype)
        since = before.last_transition_time if before is not None and before.status == status else stamp
        conditions.append(
            Condition(
                type=ctype,
                status=status,
                reason=reason,
                message=message[:32768],
                last_transition_time=since,
                observed_generation=obs.generation,
            )
        )
    order = [ConditionType.READY, ConditionType.PROGRESSING, ConditionType.DEGRADED, ConditionType.SPEC_VALID]
    kept = [c for c in obs.previous.conditions if c.type not in order]  # e.g. MetricsAvailable, owned elsewhere
    return sorted(conditions, key=lambda c: order.index(c.type)) + kept


def compute_status(obs: Observation) -> LLMDeploymentStatus:
    """The whole status.  With an invalid spec the last good plan and args stay: they describe what runs."""
    prev = obs.previous
    rendered = obs.rendered
    child = obs.child
    return LLMDeploymentStatus(
        observed_generation=obs.generation,
        conditions=compute_conditions(obs),
        plan=rendered.plan.status() if rendered else prev.plan,
        vllm_version=rendered.plan.vllm_version if rendered else prev.vllm_version,
        vllm_args=rendered.vllm_args if rendered else prev.vllm_args,
        endpoint=rendered.endpoint if rendered else prev.endpoint,
        served_model_name=rendered.served_model_name if rendered else prev.served_model_name,
        replicas=child.replicas if child else 0,
        ready_replicas=child.ready_replicas if child else 0,
        desired_replicas=obs.desired_replicas,
        selector=rendered.selector if rendered else prev.selector,
        metrics=prev.metrics,
        last_scale_time=prev.last_scale_time,
        last_scale_reason=prev.last_scale_reason,
        scale_history=prev.scale_history,
    )


def condition(status: LLMDeploymentStatus, ctype: str) -> Condition | None:
    return next((c for c in status.conditions if c.type == ctype), None)


@dataclass(frozen=True)
class EventNote:
    type: str  # Normal or Warning
    reason: str
    message: str


def events_for(before: LLMDeploymentStatus, after: LLMDeploymentStatus, created: bool) -> list[EventNote]:
    """What a person should see in `kubectl describe`: only changes, so a steady object stays quiet."""
    notes: list[EventNote] = []
    valid_before, valid_after = condition(before, ConditionType.SPEC_VALID), condition(after, ConditionType.SPEC_VALID)
    if valid_after is not None and valid_after.status == "False":
        if valid_before is None or valid_before.status != "False" or valid_before.message != valid_after.message:
            notes.append(EventNote("Warning", valid_after.reason, valid_after.message[:1024]))
    elif valid_after is not None and (
        valid_before is None or valid_before.status != "True" or before.vllm_args != after.vllm_args
    ):
        notes.append(EventNote("Normal", "Planned", valid_after.message))
    if created:
        notes.append(EventNote("Normal", "Applied", "created the vLLM Deployment and Service"))
    elif before.vllm_args and after.vllm_args != before.vllm_args and valid_after and valid_after.status == "True":
        notes.append(EventNote("Normal", "Applied", "rolled the vLLM Deployment to the new spec"))
    if before.desired_replicas is not None and after.desired_replicas != before.desired_replicas:
        notes.append(EventNote("Normal", "Scaled", f"replicas {before.desired_replicas} → {after.desired_replicas}"))
    ready_before, ready_after = condition(before, ConditionType.READY), condition(after, ConditionType.READY)
    if ready_after is not None and ready_before is not None and ready_before.status != ready_after.status:
        kind = "Normal" if ready_after.status == "True" else "Warning"
        notes.append(EventNote(kind, "Ready" if ready_after.status == "True" else "NotReady", ready_after.message))
    return notes


METRICS_AVAILABLE = "MetricsAvailable"
HISTORY_LENGTH = 10


def autoscaled_status(
    previous: LLMDeploymentStatus,
    generation: int,
    now: datetime,
    replicas_before: int,
    replicas_after: int,
    reason: str,
    signals: Any,
    unavailable: tuple[str, str] | None,
) -> LLMDeploymentStatus:
    """The status after one autoscaler pass: desired replicas, metrics, MetricsAvailable, scale history."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    if unavailable is None:
        cond_status, cond_reason, message = "True", "MetricsRead", f"read from {signals.replicas_reporting} replicas"
        metrics = MetricsStatus(
            kv_cache_usage_percent=round(signals.kv_usage_mean * 100) if signals.kv_usage_mean is not None else None,
            queue_wait_p90_seconds=round(signals.queue_wait_p90, 2) if signals.queue_wait_p90 is not None else None,
            requests_running=signals.running,
            requests_waiting=signals.waiting,
        )
    else:
        cond_status, (cond_reason, message) = "False", unavailable
        metrics = MetricsStatus()  # unknown is not zero: clear the numbers rather than keep stale ones
    before = next((c for c in previous.conditions if c.type == METRICS_AVAILABLE), None)
    since = before.last_transition_time if before is not None and before.status == cond_status else stamp
    cond = Condition(
        type=METRICS_AVAILABLE,
        status=cond_status,
        reason=cond_reason,
        message=message[:32768],
        last_transition_time=since,
        observed_generation=generation,
    )
    conditions = [c for c in previous.conditions if c.type != METRICS_AVAILABLE] + [cond]
    update: dict[str, Any] = {"conditions": conditions, "desired_replicas": replicas_after, "metrics": metrics}
    if replicas_after != replicas_before:
        event = ScaleEvent(time=stamp, from_replicas=replicas_before, to_replicas=replicas_after, reason=reason[:1024])
        update.update(
            last_scale_time=stamp,
            last_scale_reason=reason[:1024],
            scale_history=[*previous.scale_history, event][-HISTORY_LENGTH:],
        )
    return previous.model_copy(update=update)

"""Handlers: gather what is, call the pure core, apply, write status.  No arithmetic here.

kopf calls these from ``kvpilot.main``; they are sync (the Kubernetes client blocks) and kopf runs
them in worker threads, so one lock per LLMDeployment keeps the timer, the update handler and child
events from reconciling the same object at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from kvpilot import telemetry
from kvpilot.api.v1alpha1 import LLMDeploymentSpec, LLMDeploymentStatus
from kvpilot.autoscale.decision import Decision, ScaleState, Targets, decide
from kvpilot.errors import SpecError, TransientError
from kvpilot.kube import ApplyRejected, KindNotServed, Kube
from kvpilot.metrics.names import metric_names
from kvpilot.metrics.sources import MetricsUnavailable, PodTarget, PrometheusSource, ScrapeSource
from kvpilot.pipeline import Rendered, parse_spec, render_all
from kvpilot.render.objects import OWNER_LABEL, RenderContext, already_applied, dns_label
from kvpilot.status import (
    METRICS_AVAILABLE,
    ChildDeployment,
    EventNote,
    Observation,
    autoscaled_status,
    compute_status,
    condition,
    events_for,
)
from kvpilot.versions import VersionLine

log = logging.getLogger("kvpilot.handlers")
Obj = dict[str, Any]
PRUNABLE = [("monitoring.coreos.com/v1", "PodMonitor")]

_locks: defaultdict[tuple[str, str], threading.Lock] = defaultdict(threading.Lock)
_locks_guard = threading.Lock()


def _lock(namespace: str, name: str) -> threading.Lock:
    with _locks_guard:
        return _locks[(namespace, name)]


def plain(value: Any) -> Any:
    """kopf hands out read-only mapping views; the core wants plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def desired_replicas(spec: LLMDeploymentSpec, child: ChildDeployment | None) -> int:
    """spec.replicas, or while autoscaling: the Deployment's current count kept within min and max."""
    if not spec.autoscaling.enabled:
        return spec.replicas
    current = child.spec_replicas if child is not None else spec.autoscaling.min_replicas
    return max(spec.autoscaling.min_replicas, min(spec.autoscaling.max_replicas, current))


def _previous_status(body: Obj) -> LLMDeploymentStatus:
    try:
        return LLMDeploymentStatus.model_validate(body.get("status") or {})
    except ValidationError:
        return LLMDeploymentStatus()  # someone wrote garbage into status: start over rather than crash


def _status_patch(before: Obj, after: Obj) -> Obj:
    """A JSON merge patch from ``before`` to ``after``: keys gone from ``after`` are nulled, at any depth."""
    patch: Obj = {k: None for k in before if k not in after}
    for key, value in after.items():
        old = before.get(key)
        patch[key] = _status_patch(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return patch


def _fresh(kube: Kube, namespace: str, name: str) -> Obj | None:
    """The object as it is now (another handler may have written it since kopf saw the event); None
    once it is gone or being deleted."""
    obj = kube.get_llmdeployment(namespace, name)
    return None if obj is None or obj["metadata"].get("deletionTimestamp") else obj


def reconcile(body: Obj, kube: Kube, post_event: Any = None, now: datetime | None = None) -> LLMDeploymentStatus | None:
    """One level-based pass over an LLMDeployment. Returns the status it wrote (or found current)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    started = time.monotonic()
    with _lock(namespace, name):
        try:
            fresh = _fresh(kube, namespace, name)
            if fresh is None:
                telemetry.forget_object(namespace, name)
                return None
            status = _reconcile_locked(fresh, kube, post_event, now or datetime.now(UTC))
        except Exception:
            telemetry.RECONCILES.labels("error").inc()
            raise
        finally:
            telemetry.RECONCILE_SECONDS.observe(time.monotonic() - started)
        valid = condition(status, "SpecValid")
        telemetry.RECONCILES.labels("invalid_spec" if valid and valid.status == "False" else "ok").inc()
        return status


def _reconcile_locked(body: Obj, kube: Kube, post_event: Any, now: datetime) -> LLMDeploymentStatus:
    meta = body["metadata"]
    namespace, name, generation = meta["namespace"], meta["name"], int(meta.get("generation") or 0)
    previous = _previous_status(body)
    child_name = dns_label(name)

    child_obj = kube.get("apps/v1", "Deployment", namespace, child_name)
    child = ChildDeployment.from_object(child_obj) if child_obj else None

    spec_error: SpecError | None = None
    spec: LLMDeploymentSpec | None = None
    rendered: Rendered | None = None
    desired = previous.desired_replicas or 0
    try:
        spec = parse_spec(body.get("spec") or {})
        desired = desired_replicas(spec, child)
        ctx = RenderContext(name=name, namespace=namespace, replicas=desired, owner_uid=meta.get("uid"))
        rendered = render_all(spec, ctx)
    except SpecError as exc:
        spec_error = exc

    apply_error: str | None = None
    created = False
    if rendered is not None:
        try:
            for obj in rendered.objects:
                live = (
                    child_obj
                    if obj["kind"] == "Deployment"
                    else kube.get(obj["apiVersion"], obj["kind"], namespace, obj["metadata"]["name"])
                )
                if live is not None and already_applied(live, obj):
                    continue  # every field kvpilot sets is already so: a resync writes nothing
                try:
                    applied = kube.apply(obj)
                except KindNotServed as exc:
                    apply_error = f"{exc}; install its CRD or turn spec.observability.podMonitor off"
                    continue
                if obj["kind"] == "Deployment":
                    created = child_obj is None
                    child = ChildDeployment.from_object(applied)
            _prune(kube, rendered, namespace, child_name)
        except ApplyRejected as exc:
            apply_error = str(exc)

    status = compute_status(
        Observation(
            generation=generation,
            now=now,
            desired_replicas=desired,
            spec_error=spec_error,
            rendered=rendered,
            child=child,
            apply_error=apply_error,
            previous=previous,
        )
    )
    before, after = previous.wire(), status.wire()
    if before != after:
        _write_status(kube, body, after)
        for note in events_for(previous, status, created):
            _post(post_event, body, note)
    telemetry.observe_object(namespace, name, spec, status)
    return status


STATUS_WRITE_ATTEMPTS = 5


def _is_conflict(exc: TransientError) -> bool:
    return isinstance(exc.cause, ApiException) and exc.cause.status == 409


def _write_status(kube: Kube, body: Obj, after: Obj) -> None:
    """Patch status, guarded by the resourceVersion it was computed from.

    A 409 means someone wrote the object since. When only its metadata moved (an annotation from a
    GitOps tool, a label controller) the status computed here is still right: re-read and try again
    at once rather than waiting out a retry. When its spec or status moved, stop: the next pass
    recomputes from what is there now.
    """
    meta = body["metadata"]
    for attempt in range(STATUS_WRITE_ATTEMPTS):
        try:
            kube.patch_status(
                meta["namespace"],
                meta["name"],
                _status_patch(body.get("status") or {}, after),
                resource_version=body["metadata"].get("resourceVersion"),
            )
            return
        except TransientError as exc:
            if not _is_conflict(exc) or attempt == STATUS_WRITE_ATTEMPTS - 1:
                raise
            fresh = kube.get_llmdeployment(meta["namespace"], meta["name"])
            if fresh is None:
                return
            same_spec = fresh["metadata"].get("generation") == meta.get("generation")
            if not same_spec or fresh.get("status") != body.get("status"):
                raise
            body = fresh


def _prune(kube: Kube, rendered: Rendered, namespace: str, child_name: str) -> None:
    wanted = {(o["apiVersion"], o["kind"]) for o in rendered.objects}
    for api_version, kind in PRUNABLE:
        if (api_version, kind) in wanted:
            continue
        try:
            stale = kube.list(api_version, kind, namespace, f"{OWNER_LABEL}={child_name}")
        except KindNotServed:
            continue
        for obj in stale:
            kube.delete(api_version, kind, namespace, obj["metadata"]["name"])


def _post(post_event: Any, body: Obj, note: EventNote) -> None:
    if post_event is None:
        return
    try:
        post_event(body, type=note.type, reason=note.reason, message=note.message)
    except Exception:  # events are best effort; never fail a reconcile over one
        log.warning("could not post event %s for %s", note.reason, body["metadata"].get("name"), exc_info=True)


def reconcile_owner_of(child: Obj, kube: Kube, post_event: Any = None) -> LLMDeploymentStatus | None:
    """A managed child changed or vanished: reconcile the LLMDeployment that owns it, if it still exists."""
    meta = child.get("metadata") or {}
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "LLMDeployment"), None)
    if owner is None:
        return None
    parent = _fresh(kube, meta["namespace"], owner["name"])
    return reconcile(parent, kube, post_event) if parent else None


# ------------------------------------------------------------------------------------------ autoscaler


@dataclass
class AutoscalerMemory:
    """What the autoscaler keeps between passes: decision state per object and the metric sources."""

    scrape: ScrapeSource = field(default_factory=ScrapeSource)
    states: dict[tuple[str, str], ScaleState] = field(default_factory=dict)
    prometheus: dict[str, PrometheusSource] = field(default_factory=dict)

    def prometheus_for(self, url: str) -> PrometheusSource:
        if url not in self.prometheus:
            self.prometheus[url] = PrometheusSource(url)
        return self.prometheus[url]


def _ready_pod_targets(kube: Kube, namespace: str, selector: str, port: int) -> list[PodTarget]:
    targets = []
    for pod in kube.list("v1", "Pod", namespace, selector):
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        if ready and status.get("podIP") and not pod["metadata"].get("deletionTimestamp"):
            targets.append(PodTarget(pod["metadata"]["name"], status["podIP"], port))
    return targets


def autoscale(
    body: Obj, kube: Kube, memory: AutoscalerMemory, post_event: Any = None, now: datetime | None = None
) -> Decision | None:
    """One autoscaler pass: read metrics, decide, scale the child Deployment, record it in status."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    key = (namespace, name)
    with _lock(namespace, name):
        fresh = _fresh(kube, namespace, name)
        if fresh is None:
            memory.states.pop(key, None)
            return None
        try:
            spec = parse_spec(fresh.get("spec") or {})
            if not spec.autoscaling.enabled:
                memory.states.pop(key, None)
                return None
            rendered = render_all(spec, RenderContext(name, namespace, 1, fresh["metadata"].get("uid")))
        except SpecError:
            return None  # reconcile reports it; nothing to scale from an invalid spec
        child_name = dns_label(name)
        child_obj = kube.get("apps/v1", "Deployment", namespace, child_name)
        if child_obj is None:
            return None
        child = ChildDeployment.from_object(child_obj)
        auto = spec.autoscaling
        names = metric_names(VersionLine.parse(rendered.plan.vllm_version))
        targets = Targets(
            min_replicas=auto.min_replicas,
            max_replicas=auto.max_replicas,
            queue_wait_p90_seconds=auto.queue_wait_p90_seconds,
            kv_cache_usage=auto.kv_cache_usage_target,
            slots_per_replica=rendered.plan.max_num_seqs,
            stabilization_seconds=auto.scale_down_stabilization_seconds,
            max_scale_down_step=auto.max_scale_down_step,
            scale_to_zero_after_seconds=auto.scale_to_zero_after_seconds,
            metrics_window_seconds=auto.window_seconds,
        )
        signals = None
        unavailable: tuple[str, str] | None = None
        try:
            url = auto.metrics.prometheus_url
            if auto.metrics.source == "prometheus" or (auto.metrics.source == "auto" and url):
                assert url is not None  # the CRD's CEL rule and the model both require it
                signals = memory.prometheus_for(url).collect(namespace, child_name, names, auto.window_seconds)
            else:
                pods = _ready_pod_targets(kube, namespace, rendered.selector, spec.engine.port)
                signals = memory.scrape.collect(f"{namespace}/{name}", pods, names, auto.window_seconds)
        except MetricsUnavailable as exc:
            unavailable = (exc.reason, exc.message)
        decision = decide(
            signals,
            child.spec_replicas,
            child.ready_replicas,
            targets,
            memory.states.get(key, ScaleState()),
            time.monotonic(),
            unknown_reason=f"metrics unavailable ({unavailable[0]})" if unavailable else "no metrics",
        )
        memory.states[key] = decision.state
        telemetry.count_decision(namespace, name, decision.action)
        telemetry.DESIRED.labels(namespace, name).set(decision.replicas)
        if decision.replicas != child.spec_replicas:
            ctx = RenderContext(name, namespace, decision.replicas, fresh["metadata"].get("uid"))
            deployment = next(o for o in render_all(spec, ctx).objects if o["kind"] == "Deployment")
            kube.apply(deployment)  # same manager, same object as reconcile: only replicas change
            log.info("%s/%s: %s", namespace, name, decision.reason)
        previous = _previous_status(fresh)
        status = autoscaled_status(
            previous,
            int(fresh["metadata"].get("generation") or 0),
            now or datetime.now(UTC),
            child.spec_replicas,
            decision.replicas,
            decision.reason,
            signals,
            unavailable,
        )
        if status.wire() != previous.wire():
            _write_status(kube, fresh, status.wire())
            if decision.replicas != child.spec_replicas:
                _post(post_event, fresh, EventNote("Normal", "Scaled", decision.reason))
            before_cond = condition(previous, METRICS_AVAILABLE)
            after_cond = condition(status, METRICS_AVAILABLE)
            if after_cond and after_cond.status == "False" and (before_cond is None or before_cond.status != "False"):
                _post(post_event, fresh, EventNote("Warning", "MetricsUnavailable", after_cond.message[:1024]))
        return decision

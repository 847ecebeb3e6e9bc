"""Handlers: gather what is, call the pure core, apply, write status.  No arithmetic here.

kopf calls these from ``kvpilot.main``; they are sync (the Kubernetes client blocks) and kopf runs
them in worker threads, so one lock per LLMDeployment keeps the timer, the update handler and child
events from reconciling the same object at once.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from kvpilot.api.v1alpha1 import LLMDeploymentSpec, LLMDeploymentStatus
from kvpilot.errors import SpecError
from kvpilot.kube import ApplyRejected, KindNotServed, Kube
from kvpilot.pipeline import Rendered, parse_spec, render_all
from kvpilot.render.objects import OWNER_LABEL, RenderContext, dns_label
from kvpilot.status import ChildDeployment, EventNote, Observation, compute_status, events_for

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
    """A merge patch that also removes keys the new status no longer has."""
    patch: Obj = {k: None for k in before if k not in after}
    patch.update(after)
    return patch


def reconcile(body: Obj, kube: Kube, post_event: Any = None, now: datetime | None = None) -> LLMDeploymentStatus:
    """One level-based pass over an LLMDeployment. Returns the status it wrote (or found current)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    with _lock(namespace, name):
        return _reconcile_locked(body, kube, post_event, now or datetime.now(UTC))


def _reconcile_locked(body: Obj, kube: Kube, post_event: Any, now: datetime) -> LLMDeploymentStatus:
    meta = body["metadata"]
    namespace, name, generation = meta["namespace"], meta["name"], int(meta.get("generation") or 0)
    previous = _previous_status(body)
    child_name = dns_label(name)

    child_obj = kube.get("apps/v1", "Deployment", namespace, child_name)
    child = ChildDeployment.from_object(child_obj) if child_obj else None

    spec_error: SpecError | None = None
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
        kube.patch_status(namespace, name, _status_patch(body.get("status") or {}, after))
        for note in events_for(previous, status, created):
            _post(post_event, body, note)
    return status


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
    parent = kube.get_llmdeployment(meta["namespace"], owner["name"])
    if parent is None or parent["metadata"].get("deletionTimestamp"):
        return None
    return reconcile(parent, kube, post_event)

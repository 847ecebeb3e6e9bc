"""The operator's own Prometheus metrics, served on KVPILOT_METRICS_ADDRESS (default 0.0.0.0:9090).

Per LLMDeployment (labels ``namespace`` and ``llmdeployment``, as on vLLM's series through kvpilot's
PodMonitor): replicas desired/ready/min/max, the queue-wait SLO, its conditions and the sizing plan's
numbers, for the alert rules and dashboard in ``kvpilot.observability``. Operator-wide: reconciles by
result and duration, Kubernetes API errors, autoscaler decisions by action.
"""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from kvpilot.api.v1alpha1 import LLMDeploymentSpec, LLMDeploymentStatus

REGISTRY = CollectorRegistry(auto_describe=True)
OBJECT = ("namespace", "llmdeployment")


def _per_object(name: str, documentation: str) -> Gauge:
    return Gauge(name, documentation, OBJECT, registry=REGISTRY)


RECONCILES = Counter(
    "kvpilot_reconciles", "Reconcile passes by result: ok, invalid_spec, error.", ["result"], registry=REGISTRY
)
RECONCILE_SECONDS = Histogram(
    "kvpilot_reconcile_duration_seconds",
    "Time one reconcile pass took, API calls included.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
API_ERRORS = Counter("kvpilot_api_errors", "Failed Kubernetes API calls by HTTP status.", ["reason"], registry=REGISTRY)
DECISIONS = Counter(
    "kvpilot_autoscaler_decisions", "Autoscaler decisions by action.", [*OBJECT, "action"], registry=REGISTRY
)
CONDITION = Gauge("kvpilot_llmdeployment_condition", "1 when True, else 0.", [*OBJECT, "type"], registry=REGISTRY)
DESIRED = _per_object("kvpilot_desired_replicas", "Replicas kvpilot wants.")
READY = _per_object("kvpilot_ready_replicas", "Ready vLLM replicas.")
MIN = _per_object("kvpilot_min_replicas", "minReplicas (spec.replicas without autoscaling).")
MAX = _per_object("kvpilot_max_replicas", "maxReplicas (spec.replicas without autoscaling).")
SLO = _per_object("kvpilot_queue_wait_slo_seconds", "spec.autoscaling.queueWaitP90Seconds.")
PLAN_KV_TOKENS = _per_object("kvpilot_plan_kv_cache_tokens", "KV-cache tokens per replica in the sizing plan.")
PLAN_CONCURRENCY = _per_object("kvpilot_plan_max_concurrency", "Full-length sequences one replica holds at once.")
PLAN_GPUS = _per_object("kvpilot_plan_gpus_per_replica", "GPUs per replica in the sizing plan.")

_PER_OBJECT = (DESIRED, READY, MIN, MAX, SLO, PLAN_KV_TOKENS, PLAN_CONCURRENCY, PLAN_GPUS)
# Series with a third label (condition type, decision action) that each object has set, so that a
# deleted object's can be removed without reading prometheus_client's internals.
_EXTRA_LABELS: defaultdict[tuple[str, str], set[tuple[Gauge | Counter, str]]] = defaultdict(set)
_EXTRA_LOCK = threading.Lock()


def _with_extra_label(metric: Gauge | Counter, namespace: str, name: str, extra: str) -> None:
    with _EXTRA_LOCK:
        _EXTRA_LABELS[(namespace, name)].add((metric, extra))


def serve(address: str) -> None:
    """Serve /metrics on ``host:port``; an empty address or "off" serves nothing."""
    if not address or address == "off":
        return
    host, _, port = address.rpartition(":")
    start_http_server(int(port), addr=host or "0.0.0.0", registry=REGISTRY)


def observe_object(namespace: str, name: str, spec: LLMDeploymentSpec | None, status: LLMDeploymentStatus) -> None:
    labels = (namespace, name)
    if status.desired_replicas is not None:
        DESIRED.labels(*labels).set(status.desired_replicas)
    READY.labels(*labels).set(status.ready_replicas or 0)
    for cond in status.conditions:
        _with_extra_label(CONDITION, namespace, name, cond.type)
        CONDITION.labels(*labels, cond.type).set(1 if cond.status == "True" else 0)
    if spec is not None:
        auto = spec.autoscaling
        low, high = (auto.min_replicas, auto.max_replicas) if auto.enabled else (spec.replicas, spec.replicas)
        MIN.labels(*labels).set(low)
        MAX.labels(*labels).set(high)
        SLO.labels(*labels).set(auto.queue_wait_p90_seconds)
    plan = status.plan
    if plan is not None:
        for gauge, value in (
            (PLAN_KV_TOKENS, plan.kv_cache_tokens),
            (PLAN_CONCURRENCY, plan.max_concurrency),
            (PLAN_GPUS, plan.gpus_per_replica),
        ):
            if value is not None:
                gauge.labels(*labels).set(value)


def forget_object(namespace: str, name: str) -> None:
    """Drop a deleted LLMDeployment's series so alerts and dashboards stop showing it."""
    for gauge in _PER_OBJECT:
        with contextlib.suppress(KeyError):
            gauge.remove(namespace, name)
    with _EXTRA_LOCK:
        extras = _EXTRA_LABELS.pop((namespace, name), set())
    for metric, extra in extras:
        with contextlib.suppress(KeyError):
            metric.remove(namespace, name, extra)


def count_decision(namespace: str, name: str, action: str) -> None:
    _with_extra_label(DECISIONS, namespace, name, action)
    DECISIONS.labels(namespace, name, action).inc()

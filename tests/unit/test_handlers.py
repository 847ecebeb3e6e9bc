"""The reconcile flow with an in-memory stand-in for the API (the real API server is in tests/integration)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kvpilot.handlers import reconcile, reconcile_owner_of
from kvpilot.kube import KindNotServed

Obj = dict[str, Any]
NOW = datetime(2026, 11, 29, tzinfo=UTC)


class MemoryKube:
    def __init__(self, serve_pod_monitors: bool = False) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.status_writes = 0
        self.applies = 0
        self.serve_pod_monitors = serve_pod_monitors

    def _check(self, kind: str) -> None:
        if kind == "PodMonitor" and not self.serve_pod_monitors:
            raise KindNotServed("the cluster does not serve PodMonitor")

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.objects.get((kind, namespace, name)))

    def list(self, api_version: str, kind: str, namespace: str, label_selector: str) -> list[Obj]:
        self._check(kind)
        key, _, value = label_selector.partition("=")
        return [
            o
            for (k, ns, _), o in self.objects.items()
            if k == kind and ns == namespace and o["metadata"]["labels"].get(key) == value
        ]

    def apply(self, obj: Obj) -> Obj:
        self._check(obj["kind"])
        self.applies += 1
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        stored = copy.deepcopy(obj)
        stored["metadata"]["generation"] = 1
        stored["status"] = {
            "observedGeneration": 1,
            "replicas": obj.get("spec", {}).get("replicas", 0),
            "readyReplicas": obj.get("spec", {}).get("replicas", 0),
            "updatedReplicas": obj.get("spec", {}).get("replicas", 0),
        }
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        self.objects.pop((kind, namespace, name), None)

    def get_llmdeployment(self, namespace: str, name: str) -> Obj | None:
        return self.get("", "LLMDeployment", namespace, name)

    def patch_status(self, namespace: str, name: str, status: Obj, resource_version: str | None = None) -> Obj:
        self.status_writes += 1
        obj = self.objects[("LLMDeployment", namespace, name)]
        merged = {**(obj.get("status") or {}), **status}
        obj["status"] = {k: v for k, v in merged.items() if v is not None}
        return obj


def make(kube: MemoryKube, **spec: Any) -> Obj:
    body = {
        "apiVersion": "kvpilot.io/v1alpha1",
        "kind": "LLMDeployment",
        "metadata": {"name": "m", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {
            "model": {"id": "meta-llama/Llama-3.1-8B-Instruct"},
            "resources": {"gpuType": "L4"},
            "profile": "latency",
            **spec,
        },
    }
    kube.objects[("LLMDeployment", "ns", "m")] = body
    return body


def current(kube: MemoryKube) -> Obj:
    return copy.deepcopy(kube.objects[("LLMDeployment", "ns", "m")])


def test_reconcile_applies_children_and_writes_status_once() -> None:
    kube = MemoryKube()
    events: list[tuple[str, str]] = []
    make(kube)
    status = reconcile(current(kube), kube, lambda body, type, reason, message: events.append((type, reason)), NOW)
    assert ("Deployment", "ns", "m") in kube.objects and ("Service", "ns", "m") in kube.objects
    assert status.ready_replicas == 1 and kube.status_writes == 1
    assert ("Normal", "Applied") in events
    # A second pass over the same state writes nothing and says nothing.
    events.clear()
    reconcile(current(kube), kube, lambda *a, **k: events.append(("x", "y")), NOW)
    assert kube.status_writes == 1 and events == []


def test_invalid_spec_touches_no_child() -> None:
    kube = MemoryKube()
    make(kube, model={"id": "meta-llama/Llama-3.1-405B-Instruct"})
    status = reconcile(current(kube), kube, None, NOW)
    assert kube.applies == 0 and ("Deployment", "ns", "m") not in kube.objects
    assert status.conditions[-1].type == "SpecValid" and status.conditions[-1].status == "False"


def test_missing_pod_monitor_kind_is_reported_not_fatal() -> None:
    kube = MemoryKube(serve_pod_monitors=False)
    make(kube, observability={"podMonitor": True})
    status = reconcile(current(kube), kube, None, NOW)
    degraded = next(c for c in status.conditions if c.type == "Degraded")
    assert degraded.status == "True" and "PodMonitor" in degraded.message
    assert ("Deployment", "ns", "m") in kube.objects


def test_pod_monitor_is_pruned_when_turned_off() -> None:
    kube = MemoryKube(serve_pod_monitors=True)
    make(kube, observability={"podMonitor": True})
    reconcile(current(kube), kube, None, NOW)
    assert ("PodMonitor", "ns", "m") in kube.objects
    kube.objects[("LLMDeployment", "ns", "m")]["spec"]["observability"] = {"podMonitor": False}
    reconcile(current(kube), kube, None, NOW)
    assert ("PodMonitor", "ns", "m") not in kube.objects


def test_child_event_reconciles_its_owner() -> None:
    kube = MemoryKube()
    make(kube)
    reconcile(current(kube), kube, None, NOW)
    child = kube.objects.pop(("Deployment", "ns", "m"))
    child["metadata"]["ownerReferences"] = [{"kind": "LLMDeployment", "name": "m"}]
    reconcile_owner_of(child, kube)
    assert ("Deployment", "ns", "m") in kube.objects
    assert reconcile_owner_of({"metadata": {"namespace": "ns", "name": "x"}}, kube) is None

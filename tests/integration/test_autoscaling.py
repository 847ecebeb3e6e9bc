"""The autoscaler end to end: real API server, real Prometheus, the real operator, vLLM-format endpoints."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from kvpilot.api.v1alpha1 import GROUP, PLURAL, VERSION, manifest
from kvpilot.localcluster.controlplane import ControlPlane
from kvpilot.localcluster.process import OperatorProcess
from tests.integration.fake_vllm import FakeVllm
from tests.integration.helpers import eventually
from tests.integration.prometheus import PrometheusServer

PORT = 8000


@pytest.fixture
def ns(control_plane: ControlPlane) -> Iterator[str]:
    name = f"a-{uuid.uuid4().hex[:8]}"
    control_plane.kubectl("create", "namespace", name, check=True)
    yield name
    # Autoscaled objects left behind would keep timers scraping dead endpoints for the rest of the session.
    control_plane.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        pytest.skip("prometheus is not installed: `apt-get install prometheus` (.ci/run does it)")
    return path


@pytest.fixture
def fakes() -> Iterator[list[FakeVllm]]:
    started: list[FakeVllm] = []
    yield started
    for fake in started:
        fake.close()


def apply_autoscaled(cp: ControlPlane, ns: str, name: str, metrics: dict[str, Any]) -> None:
    autoscaling = {
        "enabled": True,
        "minReplicas": 1,
        "maxReplicas": 4,
        "queueWaitP90Seconds": 0.5,
        "kvCacheUsageTarget": 0.8,
        "windowSeconds": 10,
        "scaleDownStabilizationSeconds": 20,
        "metrics": metrics,
    }
    model = {"id": "meta-llama/Llama-3.1-8B-Instruct"}
    spec = {"model": model, "resources": {"gpuType": "H100-80GB-SXM"}, "profile": "latency", "autoscaling": autoscaling}
    obj = manifest(name, ns, spec)
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj), check=True)


def llmd(api: Any, ns: str, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)  # type: ignore[no-any-return]


def replicas(api: Any, ns: str, name: str) -> int:
    return int(client.AppsV1Api(api).read_namespaced_deployment(name, ns).spec.replicas)


def metrics_condition(api: Any, ns: str, name: str) -> dict[str, Any] | None:
    conds = (llmd(api, ns, name).get("status") or {}).get("conditions", [])
    return next((c for c in conds if c["type"] == "MetricsAvailable"), None)


def ready_pods(api: Any, ns: str, name: str) -> list[Any]:
    pods = client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"kvpilot.io/llmdeployment={name}").items
    return [
        p
        for p in pods
        if p.status.pod_ip and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def test_prometheus_drives_scale_up_hold_and_scale_down(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    api: Any,
    ns: str,
    fakes: list[FakeVllm],
    tmp_path: Path,
    prometheus_binary: str,
) -> None:
    name = "promscaled"
    # Prometheus needs its port before the LLMDeployment names it; targets are filled in once the pod runs.
    apply_autoscaled(control_plane, ns, name, {"source": "prometheus", "prometheusUrl": "http://127.0.0.1:1"})
    pod = eventually(lambda: (p := ready_pods(api, ns, name)) and p[0], 60, what="first pod ready")
    fake = FakeVllm(pod.status.pod_ip, PORT)
    fakes.append(fake)
    fake.set(running=2, waiting=0, kv=0.2, queue_wait=0.05)
    prom = PrometheusServer(tmp_path, [(f"{pod.status.pod_ip}:{PORT}", {"namespace": ns, "pod": pod.metadata.name})])
    prom.start()
    try:
        apply_autoscaled(control_plane, ns, name, {"source": "prometheus", "prometheusUrl": prom.url})
        eventually(lambda: prom.query("count(vllm:num_requests_running)"), 30, what="Prometheus scraping")
        eventually(
            lambda: (c := metrics_condition(api, ns, name)) and c["status"] == "True", 60, what="MetricsAvailable=True"
        )
        assert replicas(api, ns, name) == 1
        before = llmd(api, ns, name)

        # A queue-wait breach: p90 of 2 s against an SLO of 0.5 s.
        # 4 running stay under 75 % of the 8 batch slots, so the queue is the only target breached; the p90
        # crosses the SLO only once the new 2 s observations fill a tenth of Prometheus's window.
        fake.set(running=4, waiting=6, kv=0.5, queue_wait=2.0, rate=4)
        # The operator resizes the Deployment before it writes status, so wait on the status.
        st = eventually(
            lambda: (o := llmd(api, ns, name)) and "queue wait p90" in (o["status"].get("lastScaleReason") or "") and o,
            60,
            what="scale-up on the queue-wait breach",
        )
        assert replicas(api, ns, name) > 1
        # Argo CD and Git see no drift: the spec and its generation are exactly what was applied.
        assert st["spec"] == before["spec"] and st["metadata"]["generation"] == before["metadata"]["generation"]
        eventually(
            lambda: (
                "queue wait p90"
                in control_plane.kubectl(
                    "get", "events", "-n", ns, "--field-selector", "reason=Scaled", "-o", "json", check=True
                ).stdout
            ),
            30,
            what="a Scaled event naming the queue wait",
        )

        # Prometheus gone: unknown, so hold, whatever the (now low) load says.
        fake.set(running=0, waiting=0, kv=0.05, queue_wait=0.01, rate=1)
        prom.stop()
        eventually(
            lambda: (c := metrics_condition(api, ns, name)) and c["reason"] == "PrometheusUnreachable",
            30,
            what="MetricsAvailable=False",
        )
        held = replicas(api, ns, name)
        time.sleep(30)  # longer than the stabilization window
        assert replicas(api, ns, name) == held
        assert llmd(api, ns, name)["status"]["metrics"] == {}

        # Back: low load for longer than the window brings replicas down, one step at a time, to minReplicas.
        prom.start()
        scaled_down = eventually(
            lambda: (
                (o := llmd(api, ns, name))
                and (o["status"].get("scaleHistory") or [{}])[-1].get("toReplicas") == 1
                and o
            ),
            180,
            what="scale-down to minReplicas recorded in status",
        )
        assert replicas(api, ns, name) == 1
        history = scaled_down["status"]["scaleHistory"]
        downs = [h for h in history if h["toReplicas"] < h["fromReplicas"]]
        assert downs and all(h["fromReplicas"] - h["toReplicas"] == 1 for h in downs)
    finally:
        prom.stop()


def test_direct_scrape_scales_up_and_survives_a_hanging_pod(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str, fakes: list[FakeVllm]
) -> None:
    name = "scraped"
    apply_autoscaled(control_plane, ns, name, {"source": "scrape"})
    pod = eventually(lambda: (p := ready_pods(api, ns, name)) and p[0], 60, what="first pod ready")
    fake = FakeVllm(pod.status.pod_ip, PORT)
    fakes.append(fake)
    fake.set(running=2, waiting=0, kv=0.3, queue_wait=0.05)
    eventually(
        lambda: (c := metrics_condition(api, ns, name)) and c["status"] == "True",
        60,
        what="MetricsAvailable=True from direct scrape",
    )

    fake.set(running=8, waiting=10, kv=0.97, queue_wait=1.0, rate=4)
    eventually(lambda: replicas(api, ns, name) >= 2, 60, what="scale-up from scraped metrics")

    # Serve every new pod too, then make the first one hang: the others are still read, within bounds.
    eventually(lambda: len(ready_pods(api, ns, name)) >= 2, 60, what="second pod ready")
    for p in ready_pods(api, ns, name):
        if p.metadata.name != pod.metadata.name:
            other = FakeVllm(p.status.pod_ip, PORT)
            other.set(running=1, waiting=0, kv=0.2, queue_wait=0.05)
            fakes.append(other)
    fake.hang = True
    time.sleep(8)
    cond = metrics_condition(api, ns, name)
    assert cond is not None and cond["status"] == "True"
    status = llmd(api, ns, name)["status"]
    assert status["metrics"].get("kvCacheUsagePercent") is not None
    fake.hang = False

"""Smoke tests for the integration-test control plane (tests/integration/controlplane.py).

They need the binaries from ``hack/envtest/build.sh`` (or KVPILOT_TEST_KUBECONFIG
pointing at a cluster that runs kwok); otherwise they are skipped.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kvpilot.localcluster.controlplane import ControlPlane, wait_for

pytestmark = pytest.mark.integration

TIMEOUT = 90  # seconds; generous for a loaded 2-core machine


@pytest.fixture(scope="module")
def cp(control_plane: ControlPlane) -> ControlPlane:
    """The session's control plane (one cluster for the whole integration suite)."""
    return control_plane


@pytest.fixture(scope="module")
def api(cp: ControlPlane) -> Iterator[Any]:
    client = cp.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def namespace(cp: ControlPlane, api: Any) -> Iterator[str]:
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    core: Any = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def gpu_node(cp: ControlPlane) -> str:
    name = f"kwok-gpu-{uuid.uuid4().hex[:6]}"
    cp.add_gpu_node(name, gpu_count=8)
    return name


def test_version(cp: ControlPlane) -> None:
    version = cp.get("/version")
    assert re.fullmatch(r"v1\.\d+\.\d+.*", version["gitVersion"]), version
    if cp.expected_version is not None:
        assert version["gitVersion"] == cp.expected_version
        major, minor = cp.expected_version[1:].split(".")[:2]
        assert (version["major"], version["minor"]) == (major, minor)
    out = cp.kubectl("version", "-o", "json", check=True)
    assert version["gitVersion"] in out.stdout


def test_gpu_node_becomes_ready(cp: ControlPlane, gpu_node: str) -> None:
    node = cp.wait_node_ready(gpu_node, timeout=TIMEOUT)
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["status"]["capacity"]["cpu"] == "64"


def test_gpu_deployment_runs_on_gpu_node(cp: ControlPlane, api: Any, gpu_node: str, namespace: str) -> None:
    from kubernetes import client

    cp.wait_node_ready(gpu_node, timeout=TIMEOUT)
    apps: Any = client.AppsV1Api(api)
    core: Any = client.CoreV1Api(api)
    labels = {"app": "vllm-smoke"}
    apps.create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "vllm-smoke"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": gpu_node},
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:latest",
                                "resources": {
                                    "requests": {"nvidia.com/gpu": "1"},
                                    "limits": {"nvidia.com/gpu": "1"},
                                },
                            }
                        ],
                    },
                },
            },
        },
    )

    def pod_running() -> Any:
        pods = core.list_namespaced_pod(namespace, label_selector="app=vllm-smoke").items
        for pod in pods:
            ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
            if pod.status.phase == "Running" and ready:
                return pod
        return None

    pod = wait_for(pod_running, timeout=TIMEOUT, what="vllm-smoke pod Running and Ready")
    assert pod.spec.node_name == gpu_node

    def deployment_ready() -> Any:
        dep = apps.read_namespaced_deployment("vllm-smoke", namespace)
        return dep if (dep.status.ready_replicas or 0) == 1 else None

    wait_for(deployment_ready, timeout=TIMEOUT, what="deployment readyReplicas == 1")


def test_garbage_collection(cp: ControlPlane, api: Any, namespace: str) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core: Any = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}, "data": {"k": "v"}})
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {
                "name": "dependent",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
                ],
            },
            "stringData": {"k": "v"},
        },
    )
    assert core.read_namespaced_secret("dependent", namespace).metadata.owner_references[0].name == "owner"
    core.delete_namespaced_config_map("owner", namespace)

    def dependent_gone() -> bool:
        try:
            core.read_namespaced_secret("dependent", namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    wait_for(dependent_gone, timeout=TIMEOUT, what="dependent Secret garbage-collected")


def test_waiting_on_an_object_without_conditions_times_out_instead_of_failing(cp: ControlPlane, namespace: str) -> None:
    # A ConfigMap never has status; `kubectl wait --for=condition=…` errors on it at once.
    cp.kubectl("create", "configmap", "no-status", "-n", namespace, check=True)
    started = time.monotonic()
    assert not cp.wait_for_condition("configmap/no-status", "Ready", namespace, timeout=1.5)
    assert time.monotonic() - started >= 1.5


def test_a_crd_waited_on_right_after_it_is_applied_becomes_established(cp: ControlPlane) -> None:
    # The race the demo once lost: the CRD exists but its status has no conditions yet.
    group = f"t{uuid.uuid4().hex[:8]}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    cp.kubectl("apply", "-f", "-", input=json.dumps(crd), check=True)
    try:
        assert cp.wait_for_condition(f"crd/widgets.{group}", "Established", timeout=TIMEOUT)
        assert cp.condition_is_true(f"crd/widgets.{group}", "NamesAccepted")
    finally:
        cp.kubectl("delete", "crd", f"widgets.{group}", "--wait=false")

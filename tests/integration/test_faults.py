"""Faults against the real control plane: the API server restarted in the middle of reconciling, and
status writes that lose a race (409 Conflict) to another writer. The operator must converge, create no
duplicates, lose no status, and keep running."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import pytest
from kubernetes import client

from kvpilot.localcluster.controlplane import ControlPlane
from kvpilot.localcluster.process import OperatorProcess
from tests.bad_inputs import SENTINEL_TOKEN
from tests.integration.helpers import eventually
from tests.integration.test_operator import GROUP, PLURAL, VERSION, apply, get_llmd, llmd, ns, wait_ready  # noqa: F401


def test_api_server_restarted_mid_reconcile(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    api: Any,
    ns: str,  # noqa: F811
) -> None:
    if control_plane.external:
        pytest.skip("an external cluster's API server cannot be restarted from here")
    mark = len(operator.log_text())
    for i in range(5):
        apply(control_plane, llmd(f"f{i}", ns))
    control_plane.restart_apiserver(down_seconds=5)  # while those five are being reconciled
    api = control_plane.api_client()  # the old client's connections died with the server
    try:
        for i in range(5):
            wait_ready(api, ns, f"f{i}", timeout=120)
        apply(control_plane, llmd("f0", ns, profile="throughput"))  # and it still follows changes
        eventually(lambda: "64" in get_llmd(api, ns, "f0")["status"]["vllmArgs"], 60, what="f0 updated")
        deployments = client.AppsV1Api(api).list_namespaced_deployment(ns).items
        assert sorted(d.metadata.name for d in deployments) == [f"f{i}" for i in range(5)]
    finally:
        api.close()
    assert operator.alive(), operator.tail(80)
    log = operator.log_text()[mark:]
    assert "Traceback" not in log, log[-3000:]


def conflicts_seen(operator: OperatorProcess) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=5) as response:
        page = response.read().decode()
    prefix = 'kvpilot_api_errors_total{reason="409"}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in page.splitlines() if line.startswith(prefix))


def test_status_writes_that_lose_races_are_retried_not_lost(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    api: Any,
    ns: str,  # noqa: F811
) -> None:
    apply(control_plane, llmd("contended", ns))
    wait_ready(api, ns, "contended")
    objects = client.CustomObjectsApi(api)
    stop = threading.Event()
    bumps = 0

    def bump_resource_version() -> None:
        # Another writer (a GitOps tool's annotation, a label controller) changes the object many
        # times a second, so the operator's status patches, sent with the resourceVersion they read,
        # keep meeting a newer one: the API server answers 409 Conflict.
        nonlocal bumps
        while not stop.is_set():
            body = {"metadata": {"annotations": {"example.com/touched": str(time.monotonic())}}}
            objects.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "contended", body)
            bumps += 1

    conflicts_before = conflicts_seen(operator)
    writer = threading.Thread(target=bump_resource_version, daemon=True)
    writer.start()
    try:
        apply(control_plane, llmd("contended", ns, profile="throughput"))
        generation = get_llmd(api, ns, "contended")["metadata"]["generation"]

        def caught_up() -> Any:
            obj = get_llmd(api, ns, "contended")
            status = obj.get("status") or {}
            current = status.get("observedGeneration") == generation and "64" in status.get("vllmArgs", [])
            return obj if current else None

        obj = eventually(caught_up, 90, what="status for the new generation despite conflicting writers")
    finally:
        stop.set()
        writer.join(timeout=5)
    assert conflicts_seen(operator) > conflicts_before, "no 409 happened: the test did not test anything"
    assert all(c["observedGeneration"] == generation for c in obj["status"]["conditions"])
    assert operator.alive()
    deployments = client.AppsV1Api(api).list_namespaced_deployment(ns).items
    assert [d.metadata.name for d in deployments] == ["contended"]


def test_a_secret_value_never_leaves_its_secret(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    api: Any,
    ns: str,  # noqa: F811
) -> None:
    """A sentinel token in a Secret, referenced for the hub token and the API key: kvpilot passes
    references only, so the value appears in no rendered object, status, event or log line."""
    mark = len(operator.log_text())
    client.CoreV1Api(api).create_namespaced_secret(
        ns, {"metadata": {"name": "hf"}, "stringData": {"token": SENTINEL_TOKEN, "api-key": SENTINEL_TOKEN}}
    )
    spec = llmd("secretive", ns)
    spec["spec"]["model"]["tokenSecretRef"] = {"name": "hf", "key": "token"}
    spec["spec"]["engine"] = {"apiKeySecretRef": {"name": "hf", "key": "api-key"}}
    apply(control_plane, spec)
    obj = wait_ready(api, ns, "secretive")
    deployment = client.AppsV1Api(api).read_namespaced_deployment("secretive", ns)
    rendered = json.dumps(client.ApiClient().sanitize_for_serialization(deployment))
    env = {e.name: e for e in deployment.spec.template.spec.containers[0].env}
    assert env["HF_TOKEN"].value_from.secret_key_ref.name == "hf"
    assert env["VLLM_API_KEY"].value_from.secret_key_ref.key == "api-key"
    events = control_plane.kubectl("get", "events", "-n", ns, "-o", "json", check=True).stdout
    for where, text in {
        "Deployment": rendered,
        "status": json.dumps(obj["status"]),
        "events": events,
        "operator log": operator.log_text()[mark:],
    }.items():
        assert SENTINEL_TOKEN not in text, f"the secret leaked into the {where}"

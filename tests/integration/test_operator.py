"""The operator end to end against a real API server: create, update, invalid input, drift, GC, restart."""

from __future__ import annotations

import datetime
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kvpilot.api.v1alpha1 import GROUP, PLURAL, VERSION, manifest
from kvpilot.localcluster.controlplane import ControlPlane
from kvpilot.localcluster.process import OperatorProcess
from tests import argocd_vm
from tests.integration.helpers import ROOT, eventually


def llmd(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": {"id": "meta-llama/Llama-3.1-8B-Instruct"},
        "resources": {"gpuType": "H100-80GB-SXM"},
        "profile": "latency",
    }
    body.update(spec)
    return manifest(name, namespace, body)


@pytest.fixture
def ns(control_plane: ControlPlane) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    control_plane.kubectl("create", "namespace", name, check=True)
    yield name
    # Free the simulated GPUs for the tests after this one.
    control_plane.kubectl("delete", "namespace", name, "--wait=false")


def apply(cp: ControlPlane, obj: dict[str, Any]) -> Any:
    return cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))


def get_llmd(api: Any, ns: str, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)  # type: ignore[no-any-return]


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == ctype), None)


def handled(obj: dict[str, Any]) -> bool:
    """Whether kopf has finished with the object's current spec: its diff-base annotation is written last,
    after the handler's own status write, so a resourceVersion taken before it moves once more."""
    annotations = obj["metadata"].get("annotations") or {}
    return "kvpilot.io/last-handled-configuration" in annotations


def deployment(api: Any, ns: str, name: str) -> Any:
    try:
        return client.AppsV1Api(api).read_namespaced_deployment(name, ns)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def wait_ready(api: Any, ns: str, name: str, timeout: float = 90) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        obj = get_llmd(api, ns, name)
        c = condition(obj, "Ready")
        return obj if c and c["status"] == "True" else None

    return eventually(ready, timeout, what=f"{ns}/{name} Ready")


def test_create_gives_deployment_service_and_status(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str
) -> None:
    assert apply(control_plane, llmd("chat", ns, replicas=2)).returncode == 0
    dep = eventually(lambda: deployment(api, ns, "chat"), 30, what="Deployment created")
    container = dep.spec.template.spec.containers[0]
    assert container.command == ["vllm", "serve"]
    assert container.args[:3] == [
        "meta-llama/Llama-3.1-8B-Instruct",
        "--served-model-name",
        "meta-llama/Llama-3.1-8B-Instruct",
    ]
    assert "--max-num-seqs" in container.args and container.args[container.args.index("--max-num-seqs") + 1] == "8"
    assert container.resources.limits == {"nvidia.com/gpu": "1"}
    assert dep.metadata.owner_references[0].kind == "LLMDeployment"
    svc = eventually(lambda: client.CoreV1Api(api).read_namespaced_service("chat", ns), 30, what="Service created")
    assert svc.spec.ports[0].port == 8000

    obj = wait_ready(api, ns, "chat")
    st = obj["status"]
    assert st["readyReplicas"] == 2 and st["desiredReplicas"] == 2
    assert st["observedGeneration"] == obj["metadata"]["generation"]
    assert st["plan"]["tensorParallelSize"] == 1 and st["plan"]["kvBytesPerToken"] == 131072
    assert st["endpoint"] == f"http://chat.{ns}.svc:8000/v1"
    assert condition(obj, "SpecValid")["reason"] == "Planned"  # type: ignore[index]
    assert "kopf" not in st  # handler results do not leak into status
    pods = client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=st["selector"]).items
    nodes = {p.spec.node_name for p in pods}
    products = {client.CoreV1Api(api).read_node(n).metadata.labels["nvidia.com/gpu.product"] for n in nodes}
    assert len(pods) == 2 and products == {"NVIDIA-H100-80GB-HBM3"}
    events = control_plane.kubectl("get", "events", "-n", ns, "-o", "json", check=True).stdout
    assert '"Planned"' in events and '"Applied"' in events

    # The operator's own metrics describe the same object, with the labels the alert rules join on.
    def metrics_page() -> str | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=5) as response:
            page: str = response.read().decode()
        return page if f'kvpilot_ready_replicas{{llmdeployment="chat",namespace="{ns}"}} 2.0' in page else None

    page = eventually(metrics_page, 30, what="operator metrics for chat")
    assert f'kvpilot_desired_replicas{{llmdeployment="chat",namespace="{ns}"}} 2.0' in page
    assert f'kvpilot_llmdeployment_condition{{llmdeployment="chat",namespace="{ns}",type="Ready"}} 1.0' in page
    assert f'kvpilot_plan_gpus_per_replica{{llmdeployment="chat",namespace="{ns}"}} 1.0' in page
    assert 'kvpilot_reconciles_total{result="ok"}' in page


def test_update_rolls_the_deployment(control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str) -> None:
    apply(control_plane, llmd("svc", ns))
    first = wait_ready(api, ns, "svc")
    apply(control_plane, llmd("svc", ns, profile="throughput"))

    def rolled() -> Any:
        obj = get_llmd(api, ns, "svc")
        dep = deployment(api, ns, "svc")
        args = dep.spec.template.spec.containers[0].args
        return (
            obj
            if args[args.index("--max-num-seqs") + 1] == "64"
            and obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
            else None
        )

    obj = eventually(rolled, 60, what="rolled to the throughput profile")
    assert obj["metadata"]["generation"] > first["metadata"]["generation"]
    assert "64" in obj["status"]["vllmArgs"]
    wait_ready(api, ns, "svc")


ADMISSION_CASES = [
    ({"autoscaling": {"minReplicas": 5, "maxReplicas": 2}}, "minReplicas must not exceed maxReplicas"),
    ({"resources": {"gpuType": "H900"}}, "spec.resources.gpuType"),
    ({"resources": {"gpuType": "L4", "gpuCount": 0}}, "gpuCount is auto or a whole number"),
    ({"resources": {"gpuType": "L4", "gpuCount": "lots"}}, "gpuCount is auto or a whole number"),
    ({"model": {"id": "--help"}}, "spec.model.id"),
    ({"model": {"id": "x/y", "quantization": "awq", "dtype": "bfloat16"}}, "awq and gptq kernels compute in float16"),
    ({"engine": {"env": [{"name": "HF_TOKEN", "value": "x"}]}}, "env may not set variables kvpilot manages"),
    ({"engine": {"maxNumSeqs": -4}}, "spec.engine.maxNumSeqs"),
    ({"replicas": "three"}, "spec.replicas"),
]


@pytest.mark.parametrize(("spec", "needle"), ADMISSION_CASES)
def test_invalid_specs_rejected_at_admission(
    control_plane: ControlPlane, ns: str, spec: dict[str, Any], needle: str
) -> None:
    result = apply(control_plane, llmd("bad", ns, **spec))
    assert result.returncode != 0
    assert needle in result.stderr, result.stderr


def test_planner_invalid_spec_is_reported_and_creates_nothing(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str
) -> None:
    obj = llmd("huge", ns, model={"id": "meta-llama/Llama-3.1-405B-Instruct"}, resources={"gpuType": "L4"})
    assert apply(control_plane, obj).returncode == 0

    def reported() -> dict[str, Any] | None:
        o = get_llmd(api, ns, "huge")
        c = condition(o, "SpecValid")
        return o if c and c["status"] == "False" and handled(o) else None

    got = eventually(reported, 30, what="SpecValid=False")
    c = condition(got, "SpecValid")
    assert c is not None and c["reason"] == "DoesNotFit"
    assert "Fixes, in order" in c["message"] and "spec.resources" in c["message"]
    assert deployment(api, ns, "huge") is None
    # No retry storm: over several resync periods the object is not rewritten.
    rv = got["metadata"]["resourceVersion"]
    time.sleep(3 * operator.resync_seconds)
    assert get_llmd(api, ns, "huge")["metadata"]["resourceVersion"] == rv
    assert deployment(api, ns, "huge") is None
    warnings = control_plane.kubectl(
        "get", "events", "-n", ns, "--field-selector", "reason=DoesNotFit", "-o", "name", check=True
    ).stdout.split()
    assert len(warnings) == 1


def test_invalid_update_leaves_the_running_deployment_alone(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str
) -> None:
    apply(control_plane, llmd("keep", ns))
    wait_ready(api, ns, "keep")
    before = deployment(api, ns, "keep").metadata.resource_version
    apply(control_plane, llmd("keep", ns, engine={"extraArgs": ["--swap-space", "4"]}))

    def invalid() -> Any:
        c = condition(get_llmd(api, ns, "keep"), "SpecValid")
        return c if c and c["status"] == "False" else None

    c = eventually(invalid, 30, what="SpecValid=False")
    assert "spec.engine.extraArgs[0]" in c["message"]
    time.sleep(operator.resync_seconds)
    assert deployment(api, ns, "keep").metadata.resource_version == before


def test_drift_is_repaired(control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str) -> None:
    apply(control_plane, llmd("drift", ns))
    wait_ready(api, ns, "drift")
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)

    apps.delete_namespaced_deployment("drift", ns)
    eventually(
        lambda: deployment(api, ns, "drift") is not None and deployment(api, ns, "drift").metadata.uid,
        30,
        what="Deployment restored",
    )

    patch = {"spec": {"template": {"spec": {"containers": [{"name": "vllm", "args": ["evil"]}]}}}}
    apps.patch_namespaced_deployment("drift", ns, patch)
    eventually(
        lambda: (
            deployment(api, ns, "drift").spec.template.spec.containers[0].args[0] == "meta-llama/Llama-3.1-8B-Instruct"
        ),
        30,
        what="args restored",
    )

    apps.patch_namespaced_deployment_scale("drift", ns, {"spec": {"replicas": 4}})
    eventually(lambda: deployment(api, ns, "drift").spec.replicas == 1, 30, what="replicas restored")

    core.delete_namespaced_service("drift", ns)

    def service_back() -> bool:
        try:
            return bool(core.read_namespaced_service("drift", ns))
        except ApiException:
            return False

    eventually(service_back, 30, what="Service restored")


def test_deleting_the_llmdeployment_removes_children(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str
) -> None:
    apply(control_plane, llmd("gone", ns))
    eventually(lambda: deployment(api, ns, "gone"), 30, what="Deployment created")
    control_plane.kubectl("delete", "llmd", "gone", "-n", ns, "--wait=true", check=True)
    eventually(lambda: deployment(api, ns, "gone") is None, 60, what="Deployment garbage-collected")

    def no_service() -> bool:
        try:
            client.CoreV1Api(api).read_namespaced_service("gone", ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually(no_service, 60, what="Service garbage-collected")


def test_scale_subresource(control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str) -> None:
    apply(control_plane, llmd("scaled", ns))
    wait_ready(api, ns, "scaled")
    assert control_plane.kubectl("scale", "llmd/scaled", "-n", ns, "--replicas=3").returncode == 0
    eventually(lambda: deployment(api, ns, "scaled").spec.replicas == 3, 30, what="Deployment scaled")
    obj = eventually(
        lambda: (o := wait_ready(api, ns, "scaled")) and o["status"]["readyReplicas"] == 3 and o, 60, what="3 ready"
    )
    assert obj["status"]["desiredReplicas"] == 3


def test_kubectl_get_and_explain(control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str) -> None:
    apply(control_plane, llmd("cols", ns))
    wait_ready(api, ns, "cols")
    out = control_plane.kubectl("get", "llmd", "-n", ns, check=True).stdout
    header = out.splitlines()[0].split()
    for column in ("NAME", "MODEL", "GPU", "GPUS/REPLICA", "READY", "DESIRED", "KV%", "QUEUEP90", "STATUS", "AGE"):
        assert column in header, out
    row = out.splitlines()[1].split()
    assert row[:3] == ["cols", "meta-llama/Llama-3.1-8B-Instruct", "H100-80GB-SXM"]
    assert "True" in row
    wide = control_plane.kubectl("get", "llmdeploy", "-n", ns, "-o", "wide", check=True).stdout
    assert "TP" in wide.splitlines()[0].split()
    explain = control_plane.kubectl("explain", "llmdeployment.spec", check=True).stdout
    assert "Desired state of an LLMDeployment" in explain or "Desired state" in explain
    assert "profile" in explain and "latency (8 seqs" in explain
    explain = control_plane.kubectl("explain", "llmd.spec.resources.gpuCount", check=True).stdout
    assert "auto (the planner picks the tensor-parallel size)" in explain


def test_steady_state_is_quiet(control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str) -> None:
    apply(control_plane, llmd("quiet", ns, replicas=2))
    wait_ready(api, ns, "quiet")
    time.sleep(operator.resync_seconds + 2)  # let the last status write land

    def versions() -> tuple[str, str, str]:
        return (
            get_llmd(api, ns, "quiet")["metadata"]["resourceVersion"],
            deployment(api, ns, "quiet").metadata.resource_version,
            client.CoreV1Api(api).read_namespaced_service("quiet", ns).metadata.resource_version,
        )

    before = versions()
    time.sleep(60)  # twelve resync periods
    assert versions() == before


def test_restarted_operator_converges_without_duplicates(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str
) -> None:
    operator.stop(kill=True)
    try:
        for i in range(4):
            apply(control_plane, llmd(f"r{i}", ns))
        operator.start()
        for i in range(4):
            wait_ready(api, ns, f"r{i}", timeout=150)
        operator.stop(kill=True)
        apply(control_plane, llmd("r0", ns, profile="throughput"))
        operator.start()
        # A killed operator's peering entry outlives it by kopf's 60 s lifetime; a successor that drew
        # a lower priority pauses until it expires, so allow for that pause plus the update itself.
        eventually(lambda: "64" in get_llmd(api, ns, "r0")["status"]["vllmArgs"], 150, what="r0 updated")
    finally:
        if not operator.alive():
            operator.start()
    deps = client.AppsV1Api(api).list_namespaced_deployment(ns).items
    assert sorted(d.metadata.name for d in deps) == ["r0", "r1", "r2", "r3"]
    services = client.CoreV1Api(api).list_namespaced_service(ns).items
    assert sorted(s.metadata.name for s in services) == ["r0", "r1", "r2", "r3"]

    def replica_sets_by_deployment() -> dict[str, list[Any]]:
        owned: dict[str, list[Any]] = {}
        for replica_set in client.AppsV1Api(api).list_namespaced_replica_set(ns).items:
            owner = next(o.name for o in replica_set.metadata.owner_references if o.kind == "Deployment")
            owned.setdefault(owner, []).append(replica_set)
        return owned

    # The restart must not touch the pod templates it did not change: r1..r3 keep their one
    # ReplicaSet and r0 rolls out exactly once. Its old ReplicaSet stays scaled up until the new
    # pod is ready, so the test waits for the rollout to finish rather than catching it midway.
    def rollout_finished() -> dict[str, list[Any]] | None:
        for d in client.AppsV1Api(api).list_namespaced_deployment(ns).items:
            # Until the Deployment controller has seen r0's new template, its old ReplicaSet is the only one.
            if (d.status.observed_generation or 0) < d.metadata.generation:
                return None
            counts = (d.status.replicas, d.status.updated_replicas, d.status.available_replicas, d.spec.replicas)
            if len({n or 0 for n in counts}) != 1:
                return None
        owned = replica_sets_by_deployment()
        active = [r for sets in owned.values() for r in sets if (r.spec.replicas or 0) > 0]
        return owned if len(active) == 4 else None

    owned = eventually(rollout_finished, 90, what="every rollout complete with one active ReplicaSet per Deployment")
    assert {name: len(sets) for name, sets in owned.items()} == {"r0": 2, "r1": 1, "r2": 1, "r3": 1}


def test_examples_are_accepted_by_the_api_server(control_plane: ControlPlane, ns: str) -> None:
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        if "argocd" in path.parts:
            continue
        obj = yaml.safe_load(path.read_text())
        obj["metadata"]["namespace"] = ns
        result = control_plane.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(obj))
        assert result.returncode == 0, f"{path.name}: {result.stderr}"


def test_two_replicas_elect_one_and_the_other_takes_over(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str, tmp_path: Any
) -> None:
    # An entry left by an operator an earlier test killed outlives it by 60 s and, with a higher priority,
    # would pause both replicas and then hand over to either; wait until only the incumbent's is live.
    eventually(lambda: len(live_peers(control_plane)) == 1, 90, what="earlier tests' dead peering entries to expire")
    mark = len(operator.log_text())
    second_id = f"second-{uuid.uuid4().hex[:6]}"
    second = OperatorProcess(
        control_plane.kubeconfig, tmp_path, resync_seconds=operator.resync_seconds, extra_env={"POD_ID": second_id}
    ).start()
    try:
        # The replica with the higher random priority acts. A newcomer starts paused and stays silent if it
        # loses; if it wins it logs "Resuming" and the incumbent logs "Pausing operations in favour of".
        # The priorities are in the peering object, so the test reads who wins instead of guessing by time.
        peers = eventually(
            lambda: (p := live_peers(control_plane)) and second_id in p and p, 60, what="the second's entry"
        )
        if all(peers[second_id] > priority for identity, priority in peers.items() if identity != second_id):
            eventually(lambda: "Resuming operations" in second.log_text(), 60, what="the newcomer resumes")
            eventually(
                lambda: "Pausing operations in favour of" in operator.log_text()[mark:], 30, what="incumbent pauses"
            )
            active, paused = second, operator
        else:
            active, paused = operator, second
        apply(control_plane, llmd("peer-a", ns))
        wait_ready(api, ns, "peer-a")
        assert f"[{ns}/peer-a]" in active.log_text()
        assert f"[{ns}/peer-a]" not in paused.log_text()

        resumed_from = len(paused.log_text())
        active.stop(kill=True)  # its peering entry expires after kopf's 60 s lifetime
        eventually(
            lambda: "Resuming operations" in paused.log_text()[resumed_from:], 120, what="the paused replica to resume"
        )
        apply(control_plane, llmd("peer-b", ns))
        wait_ready(api, ns, "peer-b")
        assert f"[{ns}/peer-b]" in paused.log_text()
    finally:
        second.stop()
        if not operator.alive():
            operator.start()


def live_peers(cp: ControlPlane) -> dict[str, int]:
    """Identities in the operator's ClusterKopfPeering whose keep-alive has not expired yet, with their priority."""
    now = datetime.datetime.now(datetime.UTC)
    live = {}
    for identity, entry in cp.peering_entries().items():
        seen = datetime.datetime.fromisoformat(entry["lastseen"])
        if seen.tzinfo is None:
            seen = seen.replace(tzinfo=datetime.UTC)
        if seen + datetime.timedelta(seconds=entry.get("lifetime", 60)) > now:
            live[identity] = int(entry.get("priority", 0))
    return live


def test_the_peering_lifetime_setting_is_the_one_kopf_announces(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, tmp_path: Any
) -> None:
    # The lifetime in a replica's entry is what the others judge it dead by, so it bounds a takeover.
    pod_name = f"kvpilot-{uuid.uuid4().hex[:6]}"
    replica = OperatorProcess(
        control_plane.kubeconfig,
        tmp_path,
        resync_seconds=operator.resync_seconds,
        extra_env={"POD_ID": pod_name, "KVPILOT_PEERING_LIFETIME_SECONDS": "20"},
    )
    try:
        replica.start()
        entry = eventually(
            lambda: control_plane.peering_entries().get(pod_name), 60, what="the replica's peering entry"
        )
        assert entry["lifetime"] == 20
        assert (
            control_plane.peering_entries()[next(i for i in live_peers(control_plane) if i != pod_name)]["lifetime"]
            == 60
        )
    finally:
        replica.stop()  # a graceful stop withdraws the entry, so the session's operator is not held back


def test_a_container_restarted_in_its_pod_resumes_without_waiting_for_its_own_entry(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str, tmp_path: Any
) -> None:
    # The chart sets POD_ID to the pod's name, which kopf takes as the peering identity. A process that
    # crashes leaves its entry for kopf's 60 s lifetime; with a fresh identity its successor in the
    # same pod would pause behind it whenever the dead entry's random priority is the higher one.
    operator.stop()  # a graceful stop withdraws its entry
    eventually(lambda: not live_peers(control_plane), 90, what="earlier tests' peering entries to expire")
    pod_name = f"kvpilot-{uuid.uuid4().hex[:6]}"
    pod = OperatorProcess(
        control_plane.kubeconfig, tmp_path, resync_seconds=operator.resync_seconds, extra_env={"POD_ID": pod_name}
    )
    try:
        pod.start()
        apply(control_plane, llmd("before-crash", ns))
        wait_ready(api, ns, "before-crash")
        pod.stop(kill=True)
        assert list(live_peers(control_plane)) == [pod_name]  # the crashed process's entry outlives it
        pod.start()
        apply(control_plane, llmd("after-crash", ns))
        # The guard against a 60 s pause is the log line; the timeout only bounds a slow machine.
        wait_ready(api, ns, "after-crash", timeout=90)
        assert "Pausing operations" not in pod.log_text()
    finally:
        pod.stop()
        if not operator.alive():
            operator.start()


def test_argo_cd_judges_the_operators_live_objects(
    control_plane: ControlPlane, operator: OperatorProcess, api: Any, ns: str
) -> None:
    vm = argocd_vm.required()
    apply(control_plane, llmd("argo-ok", ns))
    apply(control_plane, llmd("argo-bad", ns, model={"id": "meta-llama/Llama-3.1-405B-Instruct"}))
    ready = wait_ready(api, ns, "argo-ok")

    def invalid() -> dict[str, Any] | None:
        obj = get_llmd(api, ns, "argo-bad")
        c = condition(obj, "SpecValid")
        return obj if c and c["status"] == "False" else None

    healthy, degraded = argocd_vm.judge(
        vm, ROOT / "examples" / "argocd" / "health.lua", [ready, eventually(invalid, 30)]
    )
    assert healthy["status"] == "Healthy", healthy
    assert degraded["status"] == "Degraded" and "spec.resources" in degraded["message"], degraded

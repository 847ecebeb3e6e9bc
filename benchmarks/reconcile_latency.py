"""Reconcile latency: `kubectl apply` of an LLMDeployment → its vLLM Deployment exists.

Runs against the local control plane (hack/envtest/build.sh) or KVPILOT_TEST_KUBECONFIG, with the
operator as a real `kvpilot run` process. The baseline, side by side, is the same wait for a
Deployment applied directly with kubectl: the floor set by kubectl and the API server alone.

    python benchmarks/reconcile_latency.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml
from kubernetes import client, watch
from manifests import llmdeployment

from kvpilot.localcluster.controlplane import ControlPlane
from kvpilot.localcluster.process import OperatorProcess


def llmd(name: str, ns: str) -> str:
    return yaml.safe_dump(llmdeployment(name, ns))


def plain_deployment(name: str, ns: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        }
    )


def timed_create(cp: ControlPlane, api: client.ApiClient, ns: str, name: str, manifest: str) -> float:
    """Seconds from starting `kubectl apply` until the watch sees Deployment ``name`` added."""
    seen = threading.Event()
    stop = watch.Watch()

    def watcher() -> None:
        for event in stop.stream(client.AppsV1Api(api).list_namespaced_deployment, ns, timeout_seconds=60):
            if event["type"] == "ADDED" and event["object"].metadata.name == name:
                seen.set()
                stop.stop()

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    time.sleep(0.3)  # let the watch open
    t0 = time.monotonic()
    cp.kubectl("apply", "-f", "-", input=manifest, check=True)
    if not seen.wait(60):
        raise RuntimeError(f"{name} never appeared")
    return time.monotonic() - t0


def summary(label: str, xs: list[float]) -> str:
    ordered = sorted(xs)
    p50 = statistics.median(ordered)
    return f"{label:<34}{p50 * 1000:>9.0f}{ordered[-1] * 1000:>10.0f}{statistics.mean(ordered) * 1000:>10.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as tmp:
        print(f"control plane up in {cp.start_seconds:.1f} s", flush=True)
        cp.install_crds()
        cp.add_gpu_node("gpu-0", 8, "NVIDIA-L4")
        ns = f"bench-{uuid.uuid4().hex[:6]}"
        cp.kubectl("create", "namespace", ns, check=True)
        op = OperatorProcess(cp.kubeconfig, Path(tmp), resync_seconds=60).start()
        api = cp.api_client()
        try:
            timed_create(cp, api, ns, "warmup", llmd("warmup", ns))
            operator_runs, direct_runs = [], []
            for i in range(args.runs):
                operator_runs.append(timed_create(cp, api, ns, f"m{i}", llmd(f"m{i}", ns)))
                direct_runs.append(timed_create(cp, api, ns, f"d{i}", plain_deployment(f"d{i}", ns)))
                print(
                    f"  run {i + 1:>2}: operator {operator_runs[-1] * 1000:6.0f} ms, "
                    f"direct {direct_runs[-1] * 1000:6.0f} ms",
                    flush=True,
                )
        finally:
            op.stop()
            api.close()
    print()
    print(f"{'apply → Deployment created (ms)':<34}{'p50':>9}{'worst':>10}{'mean':>10}")
    print(summary(f"kvpilot operator ({args.runs} runs)", operator_runs))
    print(summary("baseline: kubectl apply Deployment", direct_runs))
    ratio = statistics.median(operator_runs) / statistics.median(direct_runs)
    print(f"operator / baseline, p50: {ratio:.2f}x")


if __name__ == "__main__":
    main()

"""kvpilot at scale: N LLMDeployments (default 500) created at once against the real API server.

Reports the time until every one is reconciled (its Deployment applied and status written for the
current generation), per-object convergence p50/p99 (creation → status current), the operator's own
reconcile duration p50/p99 (from its /metrics), its peak RSS, API requests per LLMDeployment, and
writes per minute once steady (goal: zero). The baseline, side by side: the same N plain Deployments
created directly, which is what the API server alone costs.

    python benchmarks/scale.py [--count 500] [--steady-seconds 60]

Goals from the reliability issue: all converge in under 2 minutes on 2 cores, operator RSS under
300 MiB, zero steady-state writes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client
from manifests import llmdeployment

from kvpilot.api.v1alpha1 import GROUP, PLURAL, VERSION
from kvpilot.localcluster.controlplane import ControlPlane
from kvpilot.localcluster.process import OperatorProcess

WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE", "APPLY")


def llmd(name: str, ns: str) -> dict[str, Any]:
    # replicas 0: no GPUs needed, the control loop is what is measured
    return llmdeployment(name, ns, replicas=0, observability={"podMonitor": False})


def apiserver_requests(cp: ControlPlane) -> tuple[float, dict[str, float]]:
    """(all requests, writes by resource) the API server has served so far, from its own metrics.

    Leases are left out: kube-controller-manager and kube-scheduler renew theirs every few seconds
    whatever kvpilot does."""
    text = cp.kubectl("get", "--raw", "/metrics", check=True).stdout
    total = 0.0
    writes: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        verb = re.search(r'verb="([^"]+)"', labels)
        resource = re.search(r'resource="([^"]*)"', labels)
        subresource = re.search(r'subresource="([^"]*)"', labels)
        name = resource.group(1) if resource else ""
        if subresource and subresource.group(1):
            name += "/" + subresource.group(1)
        if name == "leases":
            continue
        total += float(value)
        if verb and verb.group(1) in WRITE_VERBS:
            key = f"{verb.group(1)} {name}"
            writes[key] = writes.get(key, 0.0) + float(value)
    return total, writes


def rss_peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reconcile_quantiles(metrics_port: int) -> tuple[float, float, int]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    buckets: list[tuple[float, float]] = []
    count = 0.0
    for line in text.splitlines():
        if line.startswith("kvpilot_reconcile_duration_seconds_bucket"):
            le = re.search(r'le="([^"]+)"', line)
            assert le is not None
            buckets.append((float(le.group(1)), float(line.rsplit(" ", 1)[1])))
        elif line.startswith("kvpilot_reconcile_duration_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])

    def quantile(q: float) -> float:
        target = q * count
        previous_bound, previous_count = 0.0, 0.0
        for bound, cumulative in buckets:
            if cumulative >= target:
                if bound == float("inf"):
                    return previous_bound
                share = (target - previous_count) / max(cumulative - previous_count, 1e-9)
                return previous_bound + share * (bound - previous_bound)
            previous_bound, previous_count = bound, cumulative
        return previous_bound

    return quantile(0.5), quantile(0.99), int(count)


def current(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return status.get("observedGeneration") == obj["metadata"]["generation"] and bool(status.get("conditions"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--steady-seconds", type=float, default=120)
    parser.add_argument("--settle-seconds", type=float, default=30)
    args = parser.parse_args()
    n = args.count
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as tmp:
        print(f"control plane up in {cp.start_seconds:.1f} s", flush=True)
        cp.install_crds()
        ns = f"scale-{uuid.uuid4().hex[:6]}"
        cp.kubectl("create", "namespace", ns, check=True)
        op = OperatorProcess(cp.kubeconfig, Path(tmp), resync_seconds=60).start()
        api = cp.api_client()
        custom = client.CustomObjectsApi(api)
        apps = client.AppsV1Api(api)
        try:
            requests_before, _ = apiserver_requests(cp)
            created: dict[str, float] = {}
            started = time.monotonic()
            with ThreadPoolExecutor(8) as pool:

                def create(i: int) -> None:
                    custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, llmd(f"m{i:04d}", ns))
                    created[f"m{i:04d}"] = time.time()

                list(pool.map(create, range(n)))
            create_seconds = time.monotonic() - started
            print(f"created {n} LLMDeployments in {create_seconds:.1f} s", flush=True)
            polls = 0
            done: dict[str, float] = {}
            while len(done) < n and time.monotonic() - started < 900:
                time.sleep(1)
                polls += 1
                items = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
                for obj in items:
                    name = obj["metadata"]["name"]
                    if name not in done and current(obj):
                        stamps = [c["lastTransitionTime"] for c in obj["status"]["conditions"]]
                        written = max(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() for s in stamps)
                        done[name] = written
                if polls % 10 == 0:
                    print(f"  {time.monotonic() - started:5.0f} s: {len(done)}/{n} reconciled", flush=True)
            converge_seconds = time.monotonic() - started
            deployments = len(apps.list_namespaced_deployment(ns).items)
            requests_after, _ = apiserver_requests(cp)
            # Our own calls: the creates, the polling lists, two metrics reads.
            ours = n + polls + 1 + 2
            per_object = (requests_after - requests_before - ours) / n
            p50, p99, reconciles = reconcile_quantiles(op.metrics_port)
            latencies = sorted(max(0.0, done[k] - created[k]) for k in done)

            # Let the last status transitions land (the Deployment controller's own updates trigger them),
            # then watch: a converged fleet should write nothing.
            time.sleep(args.settle_seconds)
            print(f"steady state: watching API writes for {args.steady_seconds:.0f} s", flush=True)
            _, writes_before = apiserver_requests(cp)
            time.sleep(args.steady_seconds)
            _, writes_after = apiserver_requests(cp)
            steady = {
                k: (v - writes_before.get(k, 0.0)) * 60 / args.steady_seconds
                for k, v in writes_after.items()
                if v != writes_before.get(k, 0.0)
            }
            heartbeat = sum(v for k, v in steady.items() if "kopfpeerings" in k)  # kopf's keep-alive, by design
            steady = {k: v for k, v in steady.items() if "kopfpeerings" not in k}
            writes_per_minute = sum(steady.values())
            rss = rss_peak_mib(op.proc.pid) if op.proc else float("nan")

            # Baseline: the same number of plain Deployments, created the same way.
            base_ns = f"{ns}-base"
            cp.kubectl("create", "namespace", base_ns, check=True)
            body = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "x"}},
                    "template": {
                        "metadata": {"labels": {"app": "x"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                    },
                },
            }
            t0 = time.monotonic()
            with ThreadPoolExecutor(8) as pool:
                list(
                    pool.map(
                        lambda i: apps.create_namespaced_deployment(
                            base_ns, {**body, "metadata": {"name": f"d{i:04d}"}}
                        ),
                        range(n),
                    )
                )
            baseline_seconds = time.monotonic() - t0
        finally:
            op.stop()
            api.close()
    ok = len(done) == n and deployments == n
    print()
    print(f"{'':<46}{'kvpilot':>12}{'baseline':>12}")
    print(f"{'time until all ' + str(n) + ' converged (s)':<46}{converge_seconds:>12.1f}{baseline_seconds:>12.1f}")
    print(f"{'  of which creating them (s)':<46}{create_seconds:>12.1f}")
    p99_latency = latencies[int(0.99 * (len(latencies) - 1))]
    print(f"{'per-object convergence p50 / p99 (s)':<46}{statistics.median(latencies):>6.2f} / {p99_latency:.2f}")
    print(f"{'operator reconcile p50 / p99 (ms)':<46}{p50 * 1000:>6.0f} / {p99 * 1000:.0f}  ({reconciles} passes)")
    print(f"{'API requests per LLMDeployment':<46}{per_object:>12.1f}")
    print(f"{'operator peak RSS (MiB)':<46}{rss:>12.0f}")
    print(f"{'writes per minute once steady':<46}{writes_per_minute:>12.1f}  {steady or ''}")
    print(f"{'  plus kopf peering keep-alive writes/minute':<46}{heartbeat:>12.1f}")
    print(f"{'Deployments created':<46}{deployments:>12}")
    goals = [
        ("all converged", ok),
        ("under 2 minutes", converge_seconds < 120),
        ("RSS under 300 MiB", rss < 300),
        ("zero steady-state writes", writes_per_minute == 0),
    ]
    print("goals: " + ", ".join(f"{name} {'met' if met else 'NOT met'}" for name, met in goals))
    print(
        json.dumps(
            {
                "converge_seconds": round(converge_seconds, 1),
                "rss_mib": round(rss),
                "writes_per_minute": writes_per_minute,
            }
        )
    )


if __name__ == "__main__":
    main()

"""Operator failover: an active replica is killed; how long until a standby acts on a new LLMDeployment?

Two real `kvpilot run` processes share one peering object on the local control plane (or
KVPILOT_TEST_KUBECONFIG). At a random moment between two keep-alives the active one is SIGKILLed and an
LLMDeployment is applied at once; the figure is the time until its Deployment exists, so it includes
the standby waiting out the dead replica's peering entry and then reconciling. The baseline is kopf's
default entry lifetime (60 s), side by side with shorter `--peering-lifetime-seconds` settings.

    python benchmarks/failover.py [--lifetimes 60 30 15] [--runs 3] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from manifests import llmdeployment

from kvpilot.localcluster.controlplane import ControlPlane, wait_for
from kvpilot.localcluster.process import OperatorProcess


def one_failover(cp: ControlPlane, api: Any, tmp: Path, lifetime: int, rng: random.Random) -> float:
    peering = f"failover-{uuid.uuid4().hex[:6]}"
    ns = f"failover-{uuid.uuid4().hex[:6]}"
    cp.kubectl("create", "namespace", ns, check=True)
    replicas = {}
    for name in ("a", "b"):
        pod_id = f"{peering}-{name}"
        env = {"POD_ID": pod_id, "KVPILOT_PEERING_NAME": peering, "KVPILOT_PEERING_LIFETIME_SECONDS": str(lifetime)}
        log_dir = tmp / pod_id
        log_dir.mkdir()
        replicas[pod_id] = OperatorProcess(cp.kubeconfig, log_dir, resync_seconds=60, extra_env=env).start()
    try:

        def both_entries() -> dict[str, dict[str, Any]] | None:
            entries = cp.peering_entries(peering)
            return entries if set(entries) == set(replicas) else None

        entries = wait_for(both_entries, timeout=60, what="both peering entries")
        active = max(entries, key=lambda identity: int(entries[identity]["priority"]))
        standby = next(identity for identity in replicas if identity != active)
        # Kill somewhere between two keep-alives, as a crash would: a kill right after a keep-alive is the
        # worst case (a whole lifetime to wait), right before the next one the best.
        time.sleep(rng.uniform(0, max(1, lifetime - 10)))
        replicas[active].stop(kill=True)
        killed = time.monotonic()
        cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(llmdeployment("after-kill", ns)), check=True)
        apps = client.AppsV1Api(api)

        def deployment_exists() -> bool:
            try:
                apps.read_namespaced_deployment("after-kill", ns)
            except client.ApiException:
                return False
            return True

        wait_for(deployment_exists, timeout=lifetime + 120, interval=0.1, what="the standby's Deployment")
        took = time.monotonic() - killed
        assert "Resuming operations" in replicas[standby].log_text(), "the standby never resumed"
        return took
    finally:
        for replica in replicas.values():
            replica.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lifetimes", type=int, nargs="+", default=[60, 30, 15], help="first one is the baseline")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results: dict[int, list[float]] = {}
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as tmp:
        print(f"control plane up in {cp.start_seconds:.1f} s", flush=True)
        cp.install_crds()
        cp.add_gpu_node("gpu-0", 8, "NVIDIA-L4")
        api = cp.api_client()
        try:
            for lifetime in args.lifetimes:
                results[lifetime] = []
                for run in range(args.runs):
                    took = one_failover(cp, api, Path(tmp), lifetime, rng)
                    results[lifetime].append(took)
                    print(f"lifetime {lifetime:>3} s, run {run + 1}: kill → Deployment by the standby {took:.1f} s")
        finally:
            api.close()
    baseline = statistics.mean(results[args.lifetimes[0]])
    print(f"\n{'lifetime':>9} {'runs':>5} {'mean':>8} {'max':>8} {'vs baseline':>12}")
    for lifetime, times in results.items():
        mean = statistics.mean(times)
        print(f"{lifetime:>8}s {len(times):>5} {mean:>7.1f}s {max(times):>7.1f}s {mean / baseline:>11.2f}x")


if __name__ == "__main__":
    main()

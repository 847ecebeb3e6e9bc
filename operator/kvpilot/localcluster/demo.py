"""`kvpilot demo`: a real control plane on this machine, simulated GPU nodes, the operator, one example.

Nothing here is mocked: etcd, kube-apiserver, kube-controller-manager, kube-scheduler (built from
Go modules by hack/envtest/build.sh) and kwok, which plays the kubelet on fake GPU nodes.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import yaml

from kvpilot.localcluster.controlplane import (
    BUILD_COMMAND,
    ENVTEST_DIR,
    BinariesNotFound,
    ControlPlane,
    find_binaries,
    k8s_version,
)
from kvpilot.localcluster.process import OperatorProcess

NODES = [("gpu-l4-0", "NVIDIA-L4"), ("gpu-l4-1", "NVIDIA-L4"), ("gpu-h100-0", "NVIDIA-H100-80GB-HBM3")]


def _say(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()


def ensure_binaries(out: TextIO) -> bool:
    """Find the control-plane binaries, building them (once, cached) when the Go toolchain is here."""
    try:
        find_binaries()
        return True
    except BinariesNotFound:
        pass
    script = ENVTEST_DIR / "build.sh"
    if not script.exists() or (shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists()):
        _say(out, f"no control-plane binaries and no way to build them here ({BUILD_COMMAND} and Go are needed)")
        return False
    _say(out, f"building Kubernetes {k8s_version()} control-plane binaries from Go modules (once; ~10 min on 2 cores)")
    result = subprocess.run(["bash", str(script)], stdout=subprocess.DEVNULL, check=False)
    return result.returncode == 0


def run_demo(manifest: str, out: TextIO, keep: bool = False, timeout: float = 180) -> int:
    if not ensure_binaries(out):
        return 1
    with ControlPlane() as cp, tempfile.TemporaryDirectory(prefix="kvpilot-demo-") as tmp:
        _say(out, f"control plane up in {cp.start_seconds:.1f} s: {cp.server} (Kubernetes {k8s_version()})")
        cp.install_crds()
        for name, product in NODES:
            cp.add_gpu_node(name, gpu_count=8, gpu_product=product)
        _say(out, "simulated GPU nodes: " + ", ".join(f"{n} (8 × {p})" for n, p in NODES))
        operator = OperatorProcess(cp.kubeconfig, Path(tmp)).start()
        _say(out, f"operator running (kvpilot run), log: {operator.log}")
        try:
            doc: dict[str, Any] = yaml.safe_load(manifest)
            name = doc["metadata"]["name"]
            namespace = doc["metadata"].get("namespace", "default")
            if namespace != "default":
                cp.kubectl("create", "namespace", namespace)
            cp.kubectl("apply", "-f", "-", input=manifest, check=True)
            _say(out, f"applied LLMDeployment {namespace}/{name}; waiting for it to become Ready…")
            started = time.monotonic()
            ready = cp.wait_for_condition(f"llmd/{name}", "Ready", namespace, timeout=timeout)
            waited = time.monotonic() - started
            _say(
                out,
                f"Ready after {waited:.1f} s" if ready else f"not Ready after {waited:.0f} s; its conditions say why",
            )
            _report(cp, name, namespace, out)
            if keep:
                _say(out, f"\nthe cluster stays up: export KUBECONFIG={cp.kubeconfig}; Ctrl-C to stop")
                while operator.alive():
                    time.sleep(1)
            return 0 if ready else 1
        except KeyboardInterrupt:
            return 0
        finally:
            operator.stop()


def _report(cp: ControlPlane, name: str, namespace: str, out: TextIO) -> None:
    _say(out, "\n$ kubectl get llmd -o wide")
    _say(out, cp.kubectl("get", "llmd", "-n", namespace, "-o", "wide").stdout.rstrip())
    obj = yaml.safe_load(cp.kubectl("get", "llmd", name, "-n", namespace, "-o", "yaml", check=True).stdout)
    status = obj.get("status") or {}
    _say(out, "\nconditions:")
    for c in status.get("conditions", []):
        _say(out, f"  {c['type']:<12} {c['status']:<6} {c['reason']:<18} {c.get('message', '')[:110]}")
    _say(out, f"\nendpoint: {status.get('endpoint')}  (model name: {status.get('servedModelName')})")
    _say(out, "\nplan:")
    for line in (status.get("plan") or {}).get("explanation", []):
        _say(out, f"  - {line}")
    _say(out, "\nrendered command line:\n  vllm serve " + " ".join(status.get("vllmArgs", [])))
    _say(out, "\n$ kubectl get deployments,services,pods")
    _say(out, cp.kubectl("get", "deployments,services,pods", "-n", namespace, "-o", "wide").stdout.rstrip())

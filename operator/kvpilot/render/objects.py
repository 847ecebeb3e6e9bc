"""The Kubernetes objects around vLLM, built as data by typed functions (never YAML templates).

The builders are pure: they take the spec, the plan and a ``RenderContext`` (namespace, name, owner,
replicas) and return plain dicts ready for server-side apply.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from kvpilot.api.v1alpha1 import API_VERSION, KIND, LLMDeploymentSpec, SecretKeySelector
from kvpilot.catalog.gpus import GIB, GPU
from kvpilot.sizing.planner import SizingPlan

Obj = dict[str, Any]

MODEL_CACHE_PATH = "/models-cache"
HOME_PATH = "/home/vllm"  # torch.compile, Triton and vLLM keep caches under $HOME
SPEC_HASH_ANNOTATION = "kvpilot.io/spec-hash"
OWNER_LABEL = "kvpilot.io/llmdeployment"
MIN_STARTUP_BUDGET_SECONDS = 600
STARTUP_PROBE_PERIOD = 10


@dataclass(frozen=True)
class RenderContext:
    """Where and for whom the objects are rendered; the only non-spec inputs of the builders."""

    name: str
    namespace: str
    replicas: int
    owner_uid: str | None = None

    @property
    def child_name(self) -> str:
        return dns_label(self.name)

    def owner_references(self) -> list[Obj]:
        if not self.owner_uid:
            return []
        return [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": self.name,
                "uid": self.owner_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


def dns_label(name: str) -> str:
    """A valid Service/DNS-1035 name for ``name``: dots become dashes, long names keep a hash suffix."""
    label = name.lower().replace(".", "-")
    if not label[:1].isalpha():
        label = "m-" + label
    if len(label) > 63:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        label = label[:54].rstrip("-") + "-" + digest
    return label


def selector_labels(ctx: RenderContext) -> dict[str, str]:
    return {"app.kubernetes.io/name": "vllm", OWNER_LABEL: ctx.child_name}


def common_labels(ctx: RenderContext) -> dict[str, str]:
    return {
        **selector_labels(ctx),
        "app.kubernetes.io/instance": ctx.child_name,
        "app.kubernetes.io/component": "inference-server",
        "app.kubernetes.io/part-of": "kvpilot",
        "app.kubernetes.io/managed-by": "kvpilot",
    }


def label_selector_string(ctx: RenderContext) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(ctx).items()))


def _metadata(ctx: RenderContext, name: str | None = None) -> Obj:
    meta: Obj = {"name": name or ctx.child_name, "namespace": ctx.namespace, "labels": common_labels(ctx)}
    owners = ctx.owner_references()
    if owners:
        meta["ownerReferences"] = owners
    return meta


def endpoint_url(ctx: RenderContext, spec: LLMDeploymentSpec) -> str:
    return f"http://{ctx.child_name}.{ctx.namespace}.svc:{spec.engine.port}/v1"


def _gib_quantity(n_bytes: float) -> str:
    return f"{max(1, math.ceil(n_bytes / GIB))}Gi"


def _secret_env(name: str, ref: SecretKeySelector) -> Obj:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}


def _env(spec: LLMDeploymentSpec) -> list[Obj]:
    env: list[Obj] = [{"name": "HF_HOME", "value": f"{MODEL_CACHE_PATH}/huggingface"}]
    if spec.model.token_secret_ref:
        env.append(_secret_env("HF_TOKEN", spec.model.token_secret_ref))
    if spec.engine.api_key_secret_ref:
        env.append(_secret_env("VLLM_API_KEY", spec.engine.api_key_secret_ref))
    if spec.engine.run_as_user is not None:
        env.append({"name": "HOME", "value": HOME_PATH})
    for var in spec.engine.env:
        env.append(var.wire())
    return env


def _affinity(spec: LLMDeploymentSpec, gpu: GPU) -> Obj:
    gpu_rule = {"key": gpu.product_label, "operator": "In", "values": list(gpu.node_label_values)}
    user = dict(spec.resources.affinity or {})
    node_affinity = dict(user.pop("nodeAffinity", {}) or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or []] or [{}]
    for term in terms:  # terms are ORed, so the GPU rule must be in each of them
        term["matchExpressions"] = [*(term.get("matchExpressions") or []), gpu_rule]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    return {**user, "nodeAffinity": node_affinity}


def _probe(port_name: str, period: int, failures: int, timeout: int) -> Obj:
    return {
        "httpGet": {"path": "/health", "port": port_name},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def startup_budget_seconds(plan: SizingPlan) -> int:
    """Slow loads must not be killed: twice the estimated cold start, and never under ten minutes."""
    return max(MIN_STARTUP_BUDGET_SECONDS, 2 * plan.estimated_startup_seconds)


def spec_hash(obj: Obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def build_deployment(spec: LLMDeploymentSpec, plan: SizingPlan, args: list[str], gpu: GPU, ctx: RenderContext) -> Obj:
    res = spec.resources
    gpus = plan.gpus_per_replica
    resource_name = res.resource_name or gpu.resource_name
    shm = res.shm_size or ("1Gi" if gpus == 1 else f"{2 * gpus}Gi")
    memory = res.memory or _gib_quantity(plan.weights_bytes_total * 0.5 + 16 * GIB)
    cache_volume: Obj
    if res.model_cache.pvc_name:
        cache_volume = {"name": "model-cache", "persistentVolumeClaim": {"claimName": res.model_cache.pvc_name}}
    else:
        limit = res.model_cache.size_limit or _gib_quantity(plan.weights_bytes_total * 1.2)
        cache_volume = {"name": "model-cache", "emptyDir": {"sizeLimit": limit}}

    container: Obj = {
        "name": "vllm",
        "image": spec.engine.image,
        "command": ["vllm", "serve"],
        "args": args,
        "ports": [{"name": "http", "containerPort": spec.engine.port, "protocol": "TCP"}],
        "env": _env(spec),
        "resources": {
            "requests": {"cpu": res.cpu or str(4 * gpus), "memory": memory, resource_name: str(gpus)},
            "limits": {resource_name: str(gpus)},
        },
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "model-cache", "mountPath": MODEL_CACHE_PATH},
        ],
        "startupProbe": _probe(
            "http", STARTUP_PROBE_PERIOD, math.ceil(startup_budget_seconds(plan) / STARTUP_PROBE_PERIOD), 5
        ),
        "readinessProbe": _probe("http", 5, 3, 3),
        "livenessProbe": _probe("http", 15, 4, 10),
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    pod_security: Obj = {"seccompProfile": {"type": "RuntimeDefault"}}
    volumes: list[Obj] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}}, cache_volume]
    uid = spec.engine.run_as_user
    if uid is not None:
        pod_security.update(runAsNonRoot=True, runAsUser=uid, runAsGroup=uid, fsGroup=uid)
        volumes.append({"name": "home", "emptyDir": {}})
        container["volumeMounts"].append({"name": "home", "mountPath": HOME_PATH})
    pod_spec: Obj = {
        "affinity": _affinity(spec, gpu),
        "tolerations": [
            {"key": resource_name, "operator": "Exists", "effect": "NoSchedule"},
            *(t.wire() for t in res.tolerations),
        ],
        "securityContext": pod_security,
        "terminationGracePeriodSeconds": 120,
        "containers": [container],
        "volumes": volumes,
    }
    if res.node_selector:
        pod_spec["nodeSelector"] = dict(res.node_selector)
    annotations: dict[str, str] = {}
    if spec.observability.scrape_annotations:
        annotations = {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(spec.engine.port),
            "prometheus.io/path": "/metrics",
        }
    template: Obj = {"metadata": {"labels": common_labels(ctx), "annotations": annotations}, "spec": pod_spec}
    template["metadata"]["annotations"] = {**annotations, SPEC_HASH_ANNOTATION: spec_hash(template)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(ctx),
        "spec": {
            "replicas": ctx.replicas,
            "selector": {"matchLabels": selector_labels(ctx)},
            # Surge one pod rather than take one away: a rollout never drops capacity, and with no spare
            # GPU the new pod waits Pending while the old one keeps serving.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "progressDeadlineSeconds": startup_budget_seconds(plan) + 600,
            "template": template,
        },
    }


def build_service(spec: LLMDeploymentSpec, ctx: RenderContext) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(ctx),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(ctx),
            "ports": [{"name": "http", "port": spec.engine.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def build_pod_monitor(spec: LLMDeploymentSpec, ctx: RenderContext) -> Obj:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": _metadata(ctx),
        "spec": {
            "selector": {"matchLabels": selector_labels(ctx)},
            "podMetricsEndpoints": [
                {
                    "port": "http",
                    "path": "/metrics",
                    "interval": spec.observability.scrape_interval,
                    # Dashboards and alert rules group vLLM's series by the LLMDeployment they serve.
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_label_kvpilot_io_llmdeployment"],
                            "targetLabel": "llmdeployment",
                        }
                    ],
                }
            ],
        },
    }


def already_applied(live: Any, desired: Any) -> bool:
    """Whether ``live`` already holds every field of ``desired`` with the same value.

    The API server adds defaults and status around what was applied, so this is containment, not
    equality: dicts must contain every desired key, lists must match item by item. Anything the API
    server normalises differently (a quantity written another way) just reads as "not applied", and
    the object is applied again: the check can only save a write, never skip a needed one.
    """
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and already_applied(live[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(live) == len(desired)
            and all(already_applied(a, b) for a, b in zip(live, desired, strict=True))
        )
    return bool(live == desired and type(live) is type(desired))

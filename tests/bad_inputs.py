"""A catalogue of malformed and hostile LLMDeployments, shared by the CLI test and the integration test.

Each case is a change to a small valid object, the field path its error must name, and where it must
be caught: ``admission`` (the CRD's schema or CEL rules, at `kubectl apply`) or ``planner`` (accepted by
the API server, then reported as SpecValid=False by the operator). The CLI must refuse every case.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Obj = dict[str, Any]
SENTINEL_TOKEN = "hf_SENTINELsentinelSENTINELsentinel0042"


def base(name: str = "bad") -> Obj:
    return {
        "apiVersion": "kvpilot.io/v1alpha1",
        "kind": "LLMDeployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "model": {"id": "meta-llama/Llama-3.1-8B-Instruct"},
            "resources": {"gpuType": "L4"},
            "observability": {"podMonitor": False},
        },
    }


@dataclass(frozen=True)
class BadInput:
    id: str
    what: str
    change: Callable[[Obj], None]
    field: str  # the path the error message must name
    caught_by: Literal["admission", "planner"]

    def build(self, name: str) -> Obj:
        obj = copy.deepcopy(base(name))
        self.change(obj)
        return obj


def spec_set(path: str, value: Any) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        node = obj["spec"]
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value

    return change


def spec_del(path: str) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        node = obj["spec"]
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[key]
        del node[leaf]

    return change


def meta_set(key: str, value: Any) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        obj["metadata"][key] = value

    return change


def both(*changes: Callable[[Obj], None]) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        for c in changes:
            c(obj)

    return change


A, P = "admission", "planner"
CASES: list[BadInput] = [
    # wrong types
    BadInput(
        "type-maxnumseqs-string",
        "maxNumSeqs as a string",
        spec_set("engine.maxNumSeqs", "many"),
        "spec.engine.maxNumSeqs",
        A,
    ),
    BadInput("type-replicas-float", "replicas as a fraction", spec_set("replicas", 1.5), "spec.replicas", A),
    BadInput("type-model-list", "model as a list", spec_set("model", ["llama"]), "spec.model", A),
    BadInput(
        "type-gpu-util-string",
        "utilization as text",
        spec_set("engine.gpuMemoryUtilization", "high"),
        "spec.engine.gpuMemoryUtilization",
        A,
    ),
    BadInput(
        "type-extraargs-object",
        "extraArgs as a mapping",
        spec_set("engine.extraArgs", {"--x": 1}),
        "spec.engine.extraArgs",
        A,
    ),
    BadInput("type-autoscaling-bool", "autoscaling: true", spec_set("autoscaling", True), "spec.autoscaling", A),
    # missing required fields
    BadInput("missing-model", "no model", spec_del("model"), "spec.model", A),
    BadInput("missing-model-id", "model without id", spec_set("model", {}), "spec.model.id", A),
    BadInput("missing-resources", "no resources", spec_del("resources"), "spec.resources", A),
    BadInput("missing-gpu-type", "resources without gpuType", spec_set("resources", {}), "spec.resources.gpuType", A),
    # negative or absurd numbers
    BadInput("negative-replicas", "replicas -1", spec_set("replicas", -1), "spec.replicas", A),
    BadInput("absurd-replicas", "replicas 10^9", spec_set("replicas", 10**9), "spec.replicas", A),
    BadInput("zero-maxnumseqs", "maxNumSeqs 0", spec_set("engine.maxNumSeqs", 0), "spec.engine.maxNumSeqs", A),
    BadInput("absurd-maxnumseqs", "maxNumSeqs 10^6", spec_set("engine.maxNumSeqs", 10**6), "spec.engine.maxNumSeqs", A),
    BadInput(
        "gpu-util-above-one",
        "utilization 1.5",
        spec_set("engine.gpuMemoryUtilization", 1.5),
        "spec.engine.gpuMemoryUtilization",
        A,
    ),
    BadInput(
        "gpu-util-negative",
        "utilization -0.1",
        spec_set("engine.gpuMemoryUtilization", -0.1),
        "spec.engine.gpuMemoryUtilization",
        A,
    ),
    BadInput(
        "negative-maxmodellen", "maxModelLen -4096", spec_set("engine.maxModelLen", -4096), "spec.engine.maxModelLen", A
    ),
    BadInput("huge-gpu-count", "gpuCount 1000", spec_set("resources.gpuCount", 1000), "spec.resources.gpuCount", A),
    BadInput("zero-gpu-count", "gpuCount 0", spec_set("resources.gpuCount", 0), "spec.resources.gpuCount", A),
    BadInput("low-port", "port 80 (privileged)", spec_set("engine.port", 80), "spec.engine.port", A),
    BadInput(
        "kv-target-above-one",
        "KV target 2",
        spec_set("autoscaling.kvCacheUsageTarget", 2),
        "spec.autoscaling.kvCacheUsageTarget",
        A,
    ),
    # unknown enums
    BadInput(
        "unknown-quantization",
        "quantization int3",
        spec_set("model.quantization", "int3"),
        "spec.model.quantization",
        A,
    ),
    BadInput("unknown-gpu", "gpuType H900", spec_set("resources.gpuType", "H900"), "spec.resources.gpuType", A),
    BadInput("unknown-profile", "profile turbo", spec_set("profile", "turbo"), "spec.profile", A),
    BadInput("unknown-field", "a misspelt field", spec_set("engine.maxNumSeq", 8), "spec.engine.maxNumSeq", A),
    # cross-field rules
    BadInput(
        "min-above-max",
        "minReplicas 5 > maxReplicas 2",
        spec_set("autoscaling", {"enabled": True, "minReplicas": 5, "maxReplicas": 2}),
        "spec.autoscaling",
        A,
    ),
    BadInput("block-size-odd", "blockSize 12", spec_set("engine.blockSize", 12), "spec.engine.blockSize", P),
    BadInput(
        "prometheus-without-url",
        "metrics from Prometheus but no URL",
        spec_set("autoscaling", {"enabled": True, "metrics": {"source": "prometheus"}}),
        "spec.autoscaling",
        A,
    ),
    # only the planner can judge
    BadInput(
        "tp-does-not-divide-heads",
        "gpuCount 3 for 32 heads",
        spec_set("resources.gpuCount", 3),
        "spec.resources.gpuCount",
        P,
    ),
    BadInput(
        "context-beyond-model",
        "maxModelLen past the trained context",
        spec_set("engine.maxModelLen", 1_000_000),
        "spec.engine.maxModelLen",
        P,
    ),
    BadInput(
        "does-not-fit",
        "a 405B model on one L4",
        spec_set("model.id", "meta-llama/Llama-3.1-405B-Instruct"),
        "spec.resources",
        P,
    ),
    BadInput(
        "unknown-model", "a model kvpilot cannot size", spec_set("model.id", "acme/secret-model-7b"), "spec.model", P
    ),
    BadInput(
        "awq-on-fp16-checkpoint",
        "awq on an unquantized checkpoint",
        spec_set("model.quantization", "awq"),
        "spec.model.quantization",
        P,
    ),
    BadInput(
        "removed-flag",
        "--swap-space (gone since 0.18)",
        spec_set("engine.extraArgs", ["--swap-space", "4"]),
        "spec.engine.extraArgs[0]",
        P,
    ),
    BadInput(
        "owned-flag",
        "--tensor-parallel-size via extraArgs",
        spec_set("engine.extraArgs", ["--tensor-parallel-size=8"]),
        "spec.engine.extraArgs[0]",
        P,
    ),
    BadInput(
        "unknown-flag",
        "a flag no vLLM has",
        spec_set("engine.extraArgs", ["--make-it-fast"]),
        "spec.engine.extraArgs",
        P,
    ),
    BadInput(
        "flag-injection",
        "a flag smuggled inside a value",
        spec_set("engine.extraArgs", ["--seed=1 --api-key=x"]),
        "spec.engine.extraArgs[0]",
        P,
    ),
    BadInput(
        "secret-as-flag",
        "an HF token as a literal flag",
        spec_set("engine.extraArgs", ["--hf-token", SENTINEL_TOKEN]),
        "spec.engine.extraArgs[0]",
        P,
    ),
    BadInput(
        "old-vllm", "vLLM 0.5 (no flag table)", spec_set("engine.vllmVersion", "0.5.0"), "spec.engine.vllmVersion", P
    ),
    # hostile strings
    BadInput("megabyte-model-id", "a 1 MB model id", spec_set("model.id", "a" * 1_000_000), "spec.model.id", A),
    BadInput(
        "shell-in-model-id",
        "shell metacharacters in the model id",
        spec_set("model.id", "x; rm -rf / #"),
        "spec.model.id",
        A,
    ),
    BadInput(
        "flag-in-model-id", "a flag as the model id", spec_set("model.id", "--trust-remote-code"), "spec.model.id", A
    ),
    BadInput(
        "newline-in-model-id",
        "a newline in the model id",
        spec_set("model.id", "meta-llama/x\n--api-key=y"),
        "spec.model.id",
        A,
    ),
    BadInput(
        "unicode-image",
        "unicode in the image",
        spec_set("engine.image", "vllm/vllm-openai:v0.33.0\u202e"),
        "spec.engine.image",
        A,
    ),
    BadInput("unicode-name", "unicode and spaces in the name", meta_set("name", "llama ☃"), "metadata.name", A),
    BadInput("newline-name", "a newline in the name", meta_set("name", "a\nb"), "metadata.name", A),
    BadInput(
        "env-overrides-kvpilot",
        "env sets VLLM_API_KEY kvpilot owns",
        spec_set("engine.env", [{"name": "VLLM_API_KEY", "value": "x"}]),
        "spec.engine",
        A,
    ),
    BadInput(
        "env-sets-hf-token",
        "env carries a literal HF token",
        spec_set("engine.env", [{"name": "HF_TOKEN", "value": SENTINEL_TOKEN}]),
        "spec.engine",
        A,
    ),
    BadInput(
        "env-bad-name",
        "an env var name with a shell expansion",
        spec_set("engine.env", [{"name": "$(whoami)", "value": "1"}]),
        "spec.engine.env[0].name",
        A,
    ),
    BadInput(
        "too-many-args", "65 extra args", spec_set("engine.extraArgs", ["--seed=1"] * 65), "spec.engine.extraArgs", A
    ),
    BadInput(
        "bad-prometheus-url",
        "a Prometheus URL that is not HTTP",
        both(
            spec_set(
                "autoscaling",
                {
                    "enabled": True,
                    "metrics": {"source": "prometheus", "prometheusUrl": "file:///etc/passwd"},
                },
            )
        ),
        "spec.autoscaling.metrics.prometheusUrl",
        A,
    ),
]

"""The LLMDeployment the control-loop benchmarks create: Llama-3.1-8B on L4, latency profile."""

from __future__ import annotations

from typing import Any

from kvpilot.api.v1alpha1 import manifest


def llmdeployment(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    model = {"id": "meta-llama/Llama-3.1-8B-Instruct"}
    defaults = {"model": model, "resources": {"gpuType": "L4"}, "profile": "latency"}
    return manifest(name, namespace, {**defaults, **spec})

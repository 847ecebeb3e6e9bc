"""The LLMDeployment the control-loop benchmarks create: Llama-3.1-8B on L4, latency profile."""

from __future__ import annotations

from typing import Any


def llmdeployment(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kvpilot.io/v1alpha1",
        "kind": "LLMDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"id": "meta-llama/Llama-3.1-8B-Instruct"},
            "resources": {"gpuType": "L4"},
            "profile": "latency",
            **spec,
        },
    }

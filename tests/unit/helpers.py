from __future__ import annotations

from typing import Any

from kvpilot.api.v1alpha1 import LLMDeploymentSpec


def spec(
    model_id: str = "meta-llama/Meta-Llama-3-8B-Instruct", gpu: str = "H100-80GB-SXM", **parts: Any
) -> LLMDeploymentSpec:
    """A spec from wire-format (camelCase) parts: spec(engine={"maxNumSeqs": 8})."""
    data: dict[str, Any] = {"model": {"id": model_id}, "resources": {"gpuType": gpu}}
    for key, value in parts.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return LLMDeploymentSpec.model_validate(data)

"""Spec validation: the same rules the CRD's CEL carries, with field paths in the wire spelling."""

from __future__ import annotations

from typing import Any

import pytest

from kvpilot.api.v1alpha1 import LLMDeploymentSpec
from kvpilot.errors import SpecError
from kvpilot.pipeline import parse_llmdeployment, parse_spec


def base(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"model": {"id": "meta-llama/Llama-3.1-8B-Instruct"}, "resources": {"gpuType": "L40S"}}
    d.update(over)
    return d


@pytest.mark.parametrize(
    ("spec", "path", "needle"),
    [
        (base(autoscaling={"minReplicas": 5, "maxReplicas": 2}), "spec.autoscaling", "minReplicas must not exceed"),
        (base(autoscaling={"minReplicas": 5}), "spec.autoscaling", "minReplicas must not exceed"),
        (base(model={"id": "x/y", "quantization": "awq", "dtype": "bfloat16"}), "spec.model", "float16"),
        (base(model={"id": "--help"}), "spec.model.id", "pattern"),
        (base(model={"id": "x/y", "quantization": "int3"}), "spec.model.quantization", "none"),
        (base(resources={"gpuType": "H900"}), "spec.resources.gpuType", "unknown GPU type"),
        (base(resources={"gpuType": "L4", "gpuCount": 0}), "spec.resources.gpuCount", ""),
        (base(engine={"maxNumSeqs": -1}), "spec.engine.maxNumSeqs", "greater than or equal"),
        (base(engine={"gpuMemoryUtilization": 1.5}), "spec.engine.gpuMemoryUtilization", "0.98"),
        (base(engine={"env": [{"name": "HF_TOKEN", "value": "x"}]}), "spec.engine", "kvpilot manages"),
        (base(engine={"extraArgs": ["--seed\n1"]}), "spec.engine.extraArgs[0]", "pattern"),
        (
            base(engine={"chunkedPrefill": False, "maxNumBatchedTokens": 512, "maxModelLen": 4096}),
            "spec.engine",
            "at least",
        ),
        (base(autoscaling={"scaleToZeroAfterSeconds": 600}), "spec.autoscaling", "minReplicas 0"),
        (base(autoscaling={"metrics": {"source": "prometheus"}}), "spec.autoscaling", "prometheusUrl"),
        (base(engine={"speculative": {"method": "eagle"}}), "spec.engine.speculative", "need speculative.model"),
        (base(bogus=1), "spec.bogus", "Extra inputs"),
        (base(replicas="three"), "spec.replicas", "integer"),
    ],
)
def test_invalid_specs_name_the_field(spec: dict[str, Any], path: str, needle: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    issue = err.value.issues[0]
    assert issue.path == path
    assert needle in issue.message


def test_gpu_count_accepts_auto_and_integers_only() -> None:
    assert parse_spec(base(resources={"gpuType": "L4", "gpuCount": 2})).resources.gpu_count == 2
    assert parse_spec(base(resources={"gpuType": "L4"})).resources.gpu_count == "auto"
    with pytest.raises(SpecError):
        parse_spec(base(resources={"gpuType": "L4", "gpuCount": "many"}))


def test_whole_object_kind_is_checked() -> None:
    with pytest.raises(SpecError, match="expected LLMDeployment"):
        parse_llmdeployment({"kind": "Deployment", "spec": base()})
    with pytest.raises(SpecError):
        parse_llmdeployment(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_wire_round_trip_uses_camel_case() -> None:
    spec = LLMDeploymentSpec.model_validate(base(engine={"maxNumSeqs": 8}))
    wire = spec.wire()
    assert wire["engine"]["maxNumSeqs"] == 8
    assert LLMDeploymentSpec.model_validate(wire) == spec

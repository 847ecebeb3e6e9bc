"""Spec in, everything kvpilot decides out: the one pure entry point the CLI and the operator share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kvpilot.api.v1alpha1 import LLMDeployment, LLMDeploymentSpec
from kvpilot.catalog.gpus import get_gpu
from kvpilot.catalog.models import ResolvedModel, resolve_model
from kvpilot.errors import FieldIssue, SpecError
from kvpilot.render.objects import (
    RenderContext,
    build_deployment,
    build_pod_monitor,
    build_service,
    endpoint_url,
    label_selector_string,
)
from kvpilot.render.vllm_args import render_vllm_args, served_model_name
from kvpilot.sizing.planner import SizingPlan, plan_resolved
from kvpilot.sizing.settings import resolve_settings


@dataclass(frozen=True)
class Rendered:
    plan: SizingPlan
    vllm_args: list[str]
    objects: list[dict[str, Any]]
    endpoint: str
    served_model_name: str
    selector: str
    notes: list[str] = field(default_factory=list)


def validation_issues(exc: ValidationError, prefix: str) -> list[FieldIssue]:
    """pydantic's errors as field paths in the wire (camelCase) spelling: ``spec.engine.maxNumSeqs``."""
    issues = []
    for err in exc.errors():
        path = prefix
        for part in err["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            elif _FIELD_NAME.match(part) and part not in _UNION_TAGS:
                path += f".{part}"
            # other parts name union members or validators ("constrained-int", "literal['auto']")
        issues.append(FieldIssue(path.lstrip("."), err["msg"].removeprefix("Value error, ")))
    return issues


_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNION_TAGS = {"int", "str", "float", "bool", "dict", "list"}


DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def parse_llmdeployment(obj: dict[str, Any]) -> LLMDeployment:
    """Validate a whole object; any problem becomes a SpecError naming the field."""
    if not isinstance(obj, dict):
        raise SpecError("the document is not a mapping", path="")
    if obj.get("kind") not in (None, "LLMDeployment"):
        raise SpecError(f"kind is {obj.get('kind')!r}, expected LLMDeployment", path="kind")
    meta = obj.get("metadata") or {}
    for key, limit in (("name", 253), ("namespace", 63)):
        value = meta.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > limit or not DNS_NAME.match(value)):
            raise SpecError(
                f"{value!r} is not a valid Kubernetes {key}: lowercase letters, digits, '-' and '.', "
                f"starting and ending with a letter or digit, at most {limit} characters",
                path=f"metadata.{key}",
            )
    try:
        return LLMDeployment.model_validate(obj)
    except ValidationError as exc:
        raise SpecError(validation_issues(exc, "")) from None


def parse_spec(spec: dict[str, Any]) -> LLMDeploymentSpec:
    try:
        return LLMDeploymentSpec.model_validate(spec)
    except ValidationError as exc:
        raise SpecError(validation_issues(exc, "spec")) from None


def render_all(spec: LLMDeploymentSpec, ctx: RenderContext, model: ResolvedModel | None = None) -> Rendered:
    """Plan and render one LLMDeployment.  Raises SpecError (with field paths) for anything invalid."""
    if model is None:
        model = resolve_model(spec.model.id, spec.model.architecture, spec.model.architecture_from)
    plan = plan_resolved(spec, model)
    gpu = get_gpu(spec.resources.gpu_type)
    settings = resolve_settings(spec, model, gpu)
    args = render_vllm_args(spec, plan, settings, gpu)
    objects = [build_deployment(spec, plan, args, gpu, ctx), build_service(spec, ctx)]
    if spec.observability.pod_monitor:
        objects.append(build_pod_monitor(spec, ctx))
    return Rendered(
        plan=plan,
        vllm_args=args,
        objects=objects,
        endpoint=endpoint_url(ctx, spec),
        served_model_name=served_model_name(spec),
        selector=label_selector_string(ctx),
        notes=settings.notes,
    )

"""Generate the LLMDeployment CustomResourceDefinition from the pydantic models.

The output is a structural schema: every ``$ref`` inlined, ``anyOf [X, null]`` turned into ``X`` with
``nullable: true``, numeric exclusive bounds in the OpenAPI v3.0 form Kubernetes expects, each
model's cross-field rules as ``x-kubernetes-validations``, and no defaults (profiles fill unset
fields, so the API server must not).
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel

from kvpilot.api import v1alpha1 as api
from kvpilot.api.base import ApiModel

Schema = dict[str, Any]

_DROP = {"title", "default", "additionalProperties", "$defs"}


def _rules_by_title() -> dict[str, list[dict[str, str]]]:
    """CEL rules of every API model, keyed by the model's name as pydantic titles it."""
    out: dict[str, list[dict[str, str]]] = {}
    stack: list[type[BaseModel]] = [api.LLMDeployment]
    seen: set[type[BaseModel]] = set()
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.add(model)
        if issubclass(model, ApiModel) and model.cel_rules:
            out[model.__name__] = [r.as_validation() for r in model.cel_rules]
        for field in model.model_fields.values():
            for candidate in _model_types(field.annotation):
                stack.append(candidate)
    return out


def _model_types(annotation: Any) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    for arg in getattr(annotation, "__args__", ()) or ():
        found += _model_types(arg)
    return found


def _convert(node: Any, defs: Schema, rules: dict[str, list[dict[str, str]]]) -> Any:
    if isinstance(node, list):
        return [_convert(n, defs, rules) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].split("/")[-1]
        merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
        return _convert(merged, defs, rules)

    out: Schema = {}
    nullable = False
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(node["anyOf"])
        if node.get("x-kubernetes-int-or-string"):
            options = []
        if len(options) == 1:
            inner = _convert(options[0], defs, rules)
            node = {**inner, **{k: v for k, v in node.items() if k != "anyOf"}}
        elif options:
            raise ValueError(f"cannot express a union in a structural schema: {node}")
        else:
            node = {k: v for k, v in node.items() if k != "anyOf"}

    if "const" in node:
        out["enum"] = [node["const"]]
    for key, value in node.items():
        if key in _DROP or key == "const":
            continue
        if key == "properties":
            out["properties"] = {k: _convert(v, defs, rules) for k, v in value.items()}
        elif key == "items":
            out["items"] = _convert(value, defs, rules)
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            out[bound] = value
            out[key] = True
        else:
            out[key] = value

    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        out["additionalProperties"] = _convert(additional, defs, rules)
    if node.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    title = node.get("title")
    if title in rules and "properties" in out:
        out["x-kubernetes-validations"] = rules[title]
    if nullable:
        out["nullable"] = True
    return out


def openapi_schema() -> Schema:
    raw = api.LLMDeployment.model_json_schema(by_alias=True, mode="validation")
    rules = _rules_by_title()
    schema: Schema = _convert(raw, raw.get("$defs", {}), rules)
    props = schema["properties"]
    # apiVersion, kind and metadata are the API server's; it validates them itself.
    props["apiVersion"] = {"type": "string", "description": props["apiVersion"]["description"]}
    props["kind"] = {"type": "string", "description": props["kind"]["description"]}
    props["metadata"] = {"type": "object"}
    props["status"].pop("nullable", None)
    return schema


PRINTER_COLUMNS = [
    {"name": "Model", "type": "string", "jsonPath": ".spec.model.id"},
    {"name": "GPU", "type": "string", "jsonPath": ".spec.resources.gpuType"},
    {"name": "GPUs/Replica", "type": "integer", "jsonPath": ".status.plan.gpusPerReplica"},
    {"name": "TP", "type": "integer", "jsonPath": ".status.plan.tensorParallelSize", "priority": 1},
    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desiredReplicas"},
    {"name": "KV%", "type": "number", "jsonPath": ".status.metrics.kvCacheUsagePercent"},
    {"name": "QueueP90", "type": "number", "jsonPath": ".status.metrics.queueWaitP90Seconds"},
    {"name": "Status", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Reason", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].reason', "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{api.PLURAL}.{api.GROUP}",
            "labels": {"app.kubernetes.io/name": "kvpilot", "app.kubernetes.io/part-of": "kvpilot"},
        },
        "spec": {
            "group": api.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": api.KIND,
                "listKind": f"{api.KIND}List",
                "plural": api.PLURAL,
                "singular": api.SINGULAR,
                "shortNames": api.SHORT_NAMES,
                "categories": ["kvpilot", "ai"],
            },
            "versions": [
                {
                    "name": api.VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                }
            ],
        },
    }


HEADER = "# Generated by `kvpilot crd` from operator/kvpilot/api/v1alpha1.py. Do not edit.\n---\n"
PEERING_HEADER = (
    "# Generated by `kvpilot crd`. kopf's peering objects: replicas of the operator use them to elect\n"
    "# the one that acts (the others pause until it stops renewing its entry).\n"
)


def peering_crds() -> list[dict[str, Any]]:
    docs = []
    for scope, kind in (("Cluster", "ClusterKopfPeering"), ("Namespaced", "KopfPeering")):
        plural = kind.lower() + "s"
        docs.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.kopf.dev", "labels": {"app.kubernetes.io/part-of": "kvpilot"}},
                "spec": {
                    "group": "kopf.dev",
                    "scope": scope,
                    "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "properties": {
                                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                                    },
                                }
                            },
                        }
                    ],
                },
            }
        )
    return docs


def crd_files() -> dict[str, str]:
    """Every generated CRD file of crds/, by file name (sorted as a shell glob sorts them)."""
    peering = PEERING_HEADER + "".join("---\n" + yaml.safe_dump(d, sort_keys=False) for d in peering_crds())
    return {
        "kopf.dev_peerings.yaml": peering,
        "kvpilot.io_llmdeployments.yaml": crd_yaml(),
    }


def crd_yaml() -> str:
    return HEADER + yaml.safe_dump(crd(), sort_keys=False, width=120)


def all_crds_yaml() -> str:
    return "".join(crd_files()[name] for name in sorted(crd_files()))


def _type_of(node: Schema) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    kind = str(node.get("type", "object"))
    if kind == "array":
        return f"[]{_type_of(node.get('items', {}))}"
    if "enum" in node:
        return " \\| ".join(str(v) for v in node["enum"]) if len(node["enum"]) <= 8 else "string (enum)"
    return kind


def reference_markdown() -> str:
    """The spec's fields as a Markdown table, for the README (kept current by a test)."""
    rows = ["| field | type | description |", "|---|---|---|"]

    def walk(node: Schema, path: str, required: set[str]) -> None:
        for name, child in node.get("properties", {}).items():
            here = f"{path}.{name}"
            description = str(child.get("description", "")).replace("|", "\\|").replace("\n", " ")
            mark = " (required)" if name in required else ""
            rows.append(f"| `{here}`{mark} | {_type_of(child)} | {description} |")
            target = child.get("items", child) if child.get("type") == "array" else child
            walk(target, here + ("[]" if child.get("type") == "array" else ""), set(target.get("required", [])))

    spec = openapi_schema()["properties"]["spec"]
    walk(spec, "spec", set(spec.get("required", [])))
    return "\n".join(rows) + "\n"

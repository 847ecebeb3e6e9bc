"""The CRD is generated from the models: committed copies must match, and the schema must be structural."""

from __future__ import annotations

from typing import Any

import yaml

from kvpilot.api.crd import all_crds_yaml, crd, crd_files, crd_yaml
from kvpilot.observability import dashboard_json, prometheus_rules_yaml
from tests.conftest import ROOT

CRD_FILE = ROOT / "crds" / "kvpilot.io_llmdeployments.yaml"


def test_committed_crds_match_the_models() -> None:
    committed = {p.name: p.read_text() for p in (ROOT / "crds").glob("*.yaml")}
    assert committed == crd_files(), "crds/ is stale: run `kvpilot crd --write crds`"
    assert CRD_FILE.read_text() == crd_yaml()
    # `kvpilot crd` prints exactly what `cat crds/*.yaml` gives
    assert all_crds_yaml() == "".join(committed[name] for name in sorted(committed))
    assert len([d for d in yaml.safe_load_all(all_crds_yaml()) if d]) == 3


def test_chart_copies_match_the_generators() -> None:
    chart = ROOT / "charts" / "kvpilot"
    committed = {p.name: p.read_text() for p in (chart / "crds").glob("*.yaml")}
    assert committed == crd_files(), "charts/kvpilot/crds is stale: run hack/generate.sh"
    assert (chart / "files" / "prometheus-rules.yaml").read_text() == prometheus_rules_yaml(), "run hack/generate.sh"
    assert (chart / "files" / "dashboard.json").read_text() == dashboard_json(), "run hack/generate.sh"


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.get("properties", {}).items():
            found += _walk(value, f"{path}.{key}")
        if "items" in node:
            found += _walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            found += _walk(node["additionalProperties"], f"{path}{{}}")
    return found


def _schema() -> dict[str, Any]:
    return crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_schema_is_structural() -> None:
    text = yaml.safe_dump(_schema())
    for forbidden in ("$ref", "anyOf", "oneOf", "allOf", "$defs", "default:", "const:", "title:"):
        assert forbidden not in text, forbidden
    for path, node in _walk(_schema()):
        if path in ("", ".metadata"):
            continue
        has_type = "type" in node or node.get("x-kubernetes-int-or-string")
        assert has_type or node.get("x-kubernetes-preserve-unknown-fields"), path
        if isinstance(node.get("exclusiveMinimum"), (int, float)) and not isinstance(node["exclusiveMinimum"], bool):
            raise AssertionError(f"{path}: exclusiveMinimum must be a boolean in OpenAPI v3.0")


def test_every_field_is_described_for_kubectl_explain() -> None:
    for path, node in _walk(_schema()):
        if path.endswith("[]") or path.endswith("{}") or path in ("", ".metadata"):
            continue
        assert node.get("description"), f"{path} has no description"


def test_optional_fields_are_nullable_and_required_ones_listed() -> None:
    spec = _schema()["properties"]["spec"]
    assert set(spec["required"]) == {"model", "resources"}
    assert spec["properties"]["model"]["properties"]["revision"]["nullable"] is True
    assert spec["properties"]["resources"]["properties"]["gpuType"]["enum"][:2] == ["T4", "A10G"]


def test_cel_rules_and_subresources_and_columns() -> None:
    version = crd()["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    rules = [r["rule"] for r in spec["autoscaling"]["x-kubernetes-validations"]]
    assert any("minReplicas" in r and "maxReplicas" in r for r in rules)
    assert spec["model"]["x-kubernetes-validations"][0]["rule"].startswith("!(")
    assert spec["resources"]["properties"]["gpuCount"]["x-kubernetes-int-or-string"] is True
    assert version["subresources"]["scale"]["labelSelectorPath"] == ".status.selector"
    assert "status" in version["subresources"]
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    for name in ("Model", "GPUs/Replica", "TP", "Ready", "Desired", "KV%", "QueueP90", "Status", "Age"):
        assert name in columns
    conditions = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_readme_crd_reference_is_current() -> None:
    from kvpilot.api.crd import reference_markdown

    readme = (ROOT / "README.md").read_text()
    section = readme.split("<!-- crd-reference:start -->\n", 1)[1].split("<!-- crd-reference:end -->", 1)[0]
    assert section == reference_markdown(), "README's CRD reference is stale: regenerate it from kvpilot.api.crd"

"""The model catalog, and the loaders for a local config.json or a Hugging Face hub config."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from kvpilot.catalog.architecture import ModelArchitecture, architecture_from_hf_config
from kvpilot.errors import CatalogError

Quantization = Literal["none", "awq", "gptq", "fp8", "int8", "bitsandbytes", "gguf"]


class CatalogModel(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    id: str
    published_parameters_b: float = Field(alias="publishedParametersB")
    aliases: dict[str, Quantization] = Field(default_factory=dict)
    architecture: ModelArchitecture


class ResolvedModel(BaseModel):
    """What the estimator knows about the model a spec names, and where that knowledge came from."""

    model_config = ConfigDict(frozen=True)

    id: str
    architecture: ModelArchitecture
    source: str
    published_parameters_b: float | None = None
    # None: unknown (an explicit or borrowed architecture says nothing about the checkpoint's format).
    checkpoint_quantization: Quantization | None = "none"


@cache
def model_catalog() -> dict[str, CatalogModel]:
    text = resources.files("kvpilot").joinpath("data/models.yaml").read_text()
    return {entry["id"]: CatalogModel.model_validate(entry) for entry in yaml.safe_load(text)}


def lookup_model(model_id: str) -> ResolvedModel | None:
    """The catalog entry for an id or one of its published quantized aliases (case-insensitive)."""
    wanted = model_id.lower().rstrip("/")
    for entry in model_catalog().values():
        if entry.id.lower() == wanted:
            return ResolvedModel(
                id=entry.id,
                architecture=entry.architecture,
                source=f"catalog:{entry.id}",
                published_parameters_b=entry.published_parameters_b,
                checkpoint_quantization="fp8" if entry.architecture.native_quantization else "none",
            )
        for alias, quant in entry.aliases.items():
            if alias.lower() == wanted:
                return ResolvedModel(
                    id=alias,
                    architecture=entry.architecture,
                    source=f"catalog:{entry.id} (alias)",
                    published_parameters_b=entry.published_parameters_b,
                    checkpoint_quantization=quant,
                )
    return None


def load_local_config(path: str | Path) -> ResolvedModel:
    """Read a config.json file, or the config.json inside a model directory."""
    path = Path(path)
    file = path / "config.json" if path.is_dir() else path
    try:
        config = json.loads(file.read_text())
    except FileNotFoundError as exc:
        raise CatalogError(f"no config.json at {file}", path="spec.model.id") from exc
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{file} is not valid JSON: {exc}", path="spec.model.id") from exc
    if not isinstance(config, dict):
        raise CatalogError(f"{file} is not a JSON object", path="spec.model.id")
    quant = config.get("quantization_config", {}).get("quant_method", "none")
    return ResolvedModel(
        id=str(path),
        architecture=architecture_from_hf_config(config, source=str(file)),
        source=f"file:{file}",
        checkpoint_quantization=quant if quant in ("awq", "gptq", "fp8", "bitsandbytes") else "none",
    )


def resolve_model(
    model_id: str, override: ModelArchitecture | None = None, architecture_from: str | None = None
) -> ResolvedModel:
    """Find the architecture for a spec's model: explicit override, then catalog, then a local path.

    The hub is not consulted here: the pure core never touches the network.  ``kvpilot plan
    --hub`` and the operator fetch hub configs through ``kvpilot.catalog.hub`` and pass them in as
    an override.
    """
    if override is not None:
        return ResolvedModel(
            id=model_id, architecture=override, source="spec.model.architecture", checkpoint_quantization=None
        )
    if architecture_from:
        found = lookup_model(architecture_from)
        if found is None:
            raise CatalogError(
                f"spec.model.architectureFrom names {architecture_from!r}, which is not in the catalog "
                f"(see `kvpilot catalog models`)",
                path="spec.model.architectureFrom",
            )
        return found.model_copy(
            update={"id": model_id, "source": f"{found.source} via architectureFrom", "checkpoint_quantization": None}
        )
    found = lookup_model(model_id)
    if found is not None:
        return found
    if model_id.startswith(("/", "./")) and (Path(model_id).exists()):
        return load_local_config(model_id)
    raise CatalogError(
        f"model {model_id!r} is not in kvpilot's catalog; set spec.model.architectureFrom to a catalog "
        "model with the same architecture, give spec.model.architecture, or plan with --config "
        "pointing at its config.json (see `kvpilot catalog models`)",
        path="spec.model.id",
    )

"""The GPU catalog: memory, bandwidth, throughput and the node labels that identify each GPU."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from kvpilot.errors import CatalogError

GIB = 1024**3

# Default device-plugin resource and GPU-feature-discovery label key per vendor.
VENDOR_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
VENDOR_PRODUCT_LABEL = {"nvidia": "nvidia.com/gpu.product", "amd": "amd.com/gpu.product-name"}


class GPU(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    name: str
    vendor: Literal["nvidia", "amd"]
    nominal_gb: int = Field(alias="nominalGB")
    memory_gib: float = Field(alias="memoryGiB")
    bandwidth_tbs: float = Field(alias="bandwidthTBs")
    bf16_tflops: float = Field(alias="bf16Tflops")
    fp8_tflops: float = Field(alias="fp8Tflops")
    compute_capability: str = Field(alias="computeCapability")
    bf16: bool
    fp8: bool
    node_label_values: tuple[str, ...] = Field(alias="nodeLabelValues")

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)

    @property
    def resource_name(self) -> str:
        return VENDOR_RESOURCE[self.vendor]

    @property
    def product_label(self) -> str:
        return VENDOR_PRODUCT_LABEL[self.vendor]

    @property
    def ampere_or_newer(self) -> bool:
        """Marlin kernels (fast AWQ/GPTQ/fp8 weight-only) need sm80+."""
        if self.vendor != "nvidia":
            return False
        return float(self.compute_capability) >= 8.0


@cache
def gpu_catalog() -> dict[str, GPU]:
    text = resources.files("kvpilot").joinpath("data/gpus.yaml").read_text()
    return {entry["name"]: GPU.model_validate(entry) for entry in yaml.safe_load(text)}


def gpu_names() -> list[str]:
    return list(gpu_catalog())


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-").replace(" ", "-")


def get_gpu(name: str) -> GPU:
    """Look a GPU up by catalog name, case-insensitively, or by one of its node label values."""
    wanted = _normalise(name)
    for gpu in gpu_catalog().values():
        if _normalise(gpu.name) == wanted or wanted in (_normalise(v) for v in gpu.node_label_values):
            return gpu
    raise CatalogError(f"unknown GPU type {name!r}; known: {', '.join(gpu_names())}", path="spec.resources.gpuType")

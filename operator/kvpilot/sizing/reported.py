"""The estimator against what real vLLM servers reported at start-up.

vLLM logs its own memory decisions ("Model loading took X GiB", "GPU KV cache size: N tokens", or the
older "# GPU blocks: N"). ``tests/data/vllm_reported_memory.yaml`` keeps such lines from public issues
and logs, with the settings each server ran with; this module replays each entry through kvpilot's
estimator with the same settings and the GPU memory the log itself reports, so the comparison tests the
arithmetic, not the GPU catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from kvpilot.catalog.gpus import GIB, get_gpu
from kvpilot.catalog.models import Quantization, lookup_model
from kvpilot.errors import CatalogError
from kvpilot.sizing.estimator import count_parameters, estimate_memory, weight_bytes
from kvpilot.sizing.settings import DEFAULT_BLOCK_SIZE, EngineSettings, ModelDtype, default_gpu_memory_utilization
from kvpilot.versions import VersionLine

# How a reported vLLM --quantization (or checkpoint format) maps onto the estimator's methods.
QUANTIZATION_OF: dict[str, Quantization] = {
    "fp8": "fp8",
    "awq": "awq",
    "awq_marlin": "awq",
    "gptq": "gptq",
    "gptq_marlin": "gptq",
    "bitsandbytes": "bitsandbytes",
    "gguf": "gguf",
}
# V0's default batch (0.6-0.7): used where the log is silent.
V0_MAX_NUM_SEQS = 256


class Reported(BaseModel):
    model_config = ConfigDict(extra="ignore")

    weights_gib: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None


class ReportedStart(BaseModel):
    """One vLLM server start-up as its log reported it."""

    model_config = ConfigDict(extra="ignore")

    id: str
    model: str
    gpu: str
    total_gpu_memory_gib: float | None = None
    vllm_version: str
    tensor_parallel_size: int = 1
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool | None = None
    reported: Reported
    # An https URL, or "unlinked: ..." where the log was found through a code index that does not
    # record the repository; the quote then is the only way to recognise it.
    source: str
    # False where the source tabulates the log's numbers instead of pasting its lines: such entries are
    # shown beside the others but not held to the estimator's goals.
    verbatim: bool = True
    quote: str = ""
    note: str = ""


@dataclass(frozen=True)
class Comparison:
    entry: ReportedStart
    weights_gib: float | None  # kvpilot's estimate, per GPU
    kv_tokens: int | None
    skipped: str | None = None  # why this entry cannot be estimated

    @property
    def weights_error(self) -> float | None:
        reported = self.entry.reported.weights_gib
        if self.weights_gib is None or not reported:
            return None
        return self.weights_gib / reported - 1

    @property
    def kv_tokens_error(self) -> float | None:
        reported = self.entry.reported.kv_cache_tokens
        if self.kv_tokens is None or not reported:
            return None
        return self.kv_tokens / reported - 1


def load_reported(path: Path) -> list[ReportedStart]:
    data: list[dict[str, Any]] = yaml.safe_load(path.read_text())
    return [ReportedStart.model_validate(item) for item in data]


def _version_line(text: str) -> VersionLine:
    head = text.strip().split()[0].strip("'\"")
    major, minor = head.split(".")[:2]
    return VersionLine(int(major), int(minor))


def openai_server_defaults(gpu_name: str, memory_gib: float, line: VersionLine) -> tuple[int, int]:
    """V1's (max_num_seqs, max_num_batched_tokens) for `vllm serve` when the command line sets neither.

    vLLM picks them from the GPU (engine/arg_utils.py): 80 GB-class GPUs other than the A100 get
    1024 sequences and 8192-token steps, and since 0.28 GPUs of 160 GiB or more get 16384-token steps.
    """
    if line >= VersionLine(0, 28) and memory_gib >= 160:
        return 1024, 16384
    if memory_gib >= 70 and "a100" not in gpu_name.lower():
        return 1024, 8192
    return 256, 2048


def compare_entry(entry: ReportedStart) -> Comparison:
    model = lookup_model(entry.model)
    if model is None:
        return Comparison(entry, None, None, f"{entry.model} is not in kvpilot's catalog")
    try:
        line = _version_line(entry.vllm_version)
    except ValueError:
        return Comparison(entry, None, None, f"version {entry.vllm_version!r} is not a release number")
    try:
        gpu = get_gpu(entry.gpu)
    except CatalogError:
        gpu = get_gpu("H100-80GB-SXM")  # only its memory matters here, and that comes from the log
    if entry.total_gpu_memory_gib:
        gpu = gpu.model_copy(update={"memory_gib": entry.total_gpu_memory_gib})
    arch = model.architecture
    quantization: Quantization = "none"
    if model.checkpoint_quantization not in (None, "none"):
        quantization = model.checkpoint_quantization
    elif entry.quantization:
        if entry.quantization not in QUANTIZATION_OF:
            return Comparison(entry, None, None, f"quantization {entry.quantization} has no weight model")
        quantization = QUANTIZATION_OF[entry.quantization]
    model_dtype: ModelDtype = "float16" if arch.torch_dtype in ("float16", "float32") else "bfloat16"
    dtype: ModelDtype = model_dtype if entry.dtype == "auto" else entry.dtype  # type: ignore[assignment]
    max_model_len = entry.max_model_len or arch.max_position_embeddings
    if line >= VersionLine(0, 8):
        default_seqs, default_batched = openai_server_defaults(gpu.name, gpu.memory_gib, line)
    else:
        default_seqs, default_batched = V0_MAX_NUM_SEQS, max_model_len  # no chunked prefill: one whole prompt
    max_num_seqs = entry.max_num_seqs or default_seqs
    max_num_batched_tokens = entry.max_num_batched_tokens or max(default_batched, max_num_seqs)
    settings = EngineSettings(
        vllm_version=entry.vllm_version,
        line=line,
        profile="balanced",
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        block_size=DEFAULT_BLOCK_SIZE,
        gpu_memory_utilization=entry.gpu_memory_utilization or default_gpu_memory_utilization(line),
        chunked_prefill=entry.max_num_batched_tokens is not None,
        prefix_caching=False,
        enforce_eager=bool(entry.enforce_eager),
        dtype=dtype,
        kv_cache_dtype=entry.kv_cache_dtype,
        quantization=quantization,
        concurrent_sequences=max_num_seqs,
        tokens_per_sequence=max_model_len,
    )
    tp = entry.tensor_parallel_size
    memory = estimate_memory(arch, settings, gpu, tp)
    weights = weight_bytes(count_parameters(arch), settings) / tp
    return Comparison(entry, weights / GIB, memory.kv_tokens)


def compare_reported(entries: list[ReportedStart]) -> list[Comparison]:
    return [compare_entry(e) for e in entries]

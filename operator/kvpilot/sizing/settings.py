"""Effective engine settings: the profile's presets, overridden field by field by the spec.

Both the estimator and the renderer read these, so the plan describes exactly the command line that
runs.  Each value remembers where it came from, which the plan prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kvpilot.api.v1alpha1 import LLMDeploymentSpec, Profile
from kvpilot.catalog.gpus import GPU
from kvpilot.catalog.models import Quantization, ResolvedModel
from kvpilot.errors import FieldIssue, SpecError
from kvpilot.versions import NEWEST_SUPPORTED, OLDEST_SUPPORTED, VersionLine, version_from_image

ModelDtype = Literal["float16", "bfloat16", "float32"]


@dataclass(frozen=True)
class ProfilePreset:
    max_num_seqs: int
    max_model_len: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    purpose: str


# Measured by the seed of this product for real-time chat, general API use and batch work.
PROFILES: dict[Profile, ProfilePreset] = {
    "latency": ProfilePreset(8, 4096, 512, True, "real-time chat: small batches, short prefill chunks"),
    "balanced": ProfilePreset(32, 8192, 1024, True, "general API use"),
    "throughput": ProfilePreset(64, 2048, 2048, True, "batch work: big batches, long prefill chunks"),
}

DEFAULT_BLOCK_SIZE = 16


def default_gpu_memory_utilization(line: VersionLine) -> float:
    """vLLM raised its default from 0.90 to 0.92 in 0.20."""
    return 0.92 if line >= VersionLine(0, 20) else 0.90


def subtracts_cuda_graphs(line: VersionLine) -> bool:
    """Since 0.21 vLLM profiles CUDA-graph memory and takes it out of the KV budget by default."""
    return line >= VersionLine(0, 21)


@dataclass(frozen=True)
class EngineSettings:
    vllm_version: str
    line: VersionLine
    profile: Profile
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    gpu_memory_utilization: float
    chunked_prefill: bool
    prefix_caching: bool
    enforce_eager: bool
    dtype: ModelDtype
    kv_cache_dtype: str
    quantization: Quantization
    concurrent_sequences: int
    tokens_per_sequence: int
    notes: list[str] = field(default_factory=list)

    @property
    def dtype_bytes(self) -> int:
        return 4 if self.dtype == "float32" else 2

    @property
    def kv_dtype_bytes(self) -> int:
        if self.kv_cache_dtype.startswith("fp8"):
            return 1
        if self.kv_cache_dtype in ("bfloat16", "float16"):
            return 2
        return self.dtype_bytes


def resolve_version(spec: LLMDeploymentSpec) -> tuple[str, VersionLine]:
    engine = spec.engine
    version = engine.vllm_version.lstrip("v") if engine.vllm_version else version_from_image(engine.image)
    if version is None:
        raise SpecError(
            f"image {engine.image!r} names no vLLM version in its tag; set spec.engine.vllmVersion so kvpilot "
            "renders flags that version accepts",
            path="spec.engine.vllmVersion",
        )
    line = VersionLine.parse(version)
    if line < OLDEST_SUPPORTED or line > NEWEST_SUPPORTED:
        raise SpecError(
            f"vLLM {version} is outside the versions kvpilot has flag tables for "
            f"({OLDEST_SUPPORTED}–{NEWEST_SUPPORTED}); pick an image in that range",
            path="spec.engine.vllmVersion" if engine.vllm_version else "spec.engine.image",
        )
    return version, line


def effective_quantization(spec: LLMDeploymentSpec, model: ResolvedModel) -> Quantization:
    """The quantization that will actually run: the spec's, reconciled with the checkpoint's."""
    asked = spec.model.quantization
    carried = model.checkpoint_quantization
    if carried is None or carried == "none":
        if asked in ("awq", "gptq", "gguf", "int8") and carried == "none":
            raise SpecError(
                f"{asked} needs a checkpoint published in that format (e.g. a …-{asked.upper()} repo), but "
                f"{model.id} is unquantized; use fp8 or bitsandbytes to quantize at load time, or point "
                "spec.model.id at a quantized checkpoint",
                path="spec.model.quantization",
            )
        return asked
    if asked not in ("none", carried):
        raise SpecError(
            f"{model.id} is a {carried} checkpoint; quantization {asked} cannot be applied to it",
            path="spec.model.quantization",
        )
    return carried


def resolve_settings(spec: LLMDeploymentSpec, model: ResolvedModel, gpu: GPU) -> EngineSettings:
    """Fill every engine setting from the spec, the profile, the model's limits and the version's defaults."""
    version, line = resolve_version(spec)
    preset = PROFILES[spec.profile]
    engine = spec.engine
    arch = model.architecture
    notes: list[str] = []
    issues: list[FieldIssue] = []

    limit = arch.max_position_embeddings
    if engine.max_model_len is not None:
        max_model_len = engine.max_model_len
        if max_model_len > limit:
            issues.append(
                FieldIssue(
                    "spec.engine.maxModelLen",
                    f"{max_model_len} exceeds {model.id}'s trained context of {limit} tokens",
                )
            )
    else:
        max_model_len = min(preset.max_model_len, limit)
        if max_model_len < preset.max_model_len:
            notes.append(
                f"max context capped at the model's {limit} tokens (profile {spec.profile} asks {preset.max_model_len})"
            )

    chunked = engine.chunked_prefill if engine.chunked_prefill is not None else preset.chunked_prefill
    max_num_seqs = engine.max_num_seqs or preset.max_num_seqs
    batched = engine.max_num_batched_tokens or preset.max_num_batched_tokens
    if not chunked and batched < max_model_len:
        if engine.max_num_batched_tokens is not None:
            issues.append(
                FieldIssue(
                    "spec.engine.maxNumBatchedTokens",
                    f"without chunked prefill it must be at least maxModelLen ({max_model_len})",
                )
            )
        batched = max_model_len
        notes.append(f"chunked prefill off: step budget raised to maxModelLen ({max_model_len} tokens)")
    if batched < max_num_seqs:
        if engine.max_num_batched_tokens is not None:
            issues.append(
                FieldIssue(
                    "spec.engine.maxNumBatchedTokens",
                    f"{batched} is below maxNumSeqs ({max_num_seqs}); vLLM refuses that",
                )
            )
        batched = max_num_seqs
        notes.append(f"step budget raised to maxNumSeqs ({max_num_seqs} tokens), as vLLM requires")

    # vLLM's auto serves fp16 and fp32 checkpoints in fp16, everything else in bf16.
    model_dtype: ModelDtype = "float16" if arch.torch_dtype in ("float16", "float32") else "bfloat16"
    dtype: ModelDtype = model_dtype if spec.model.dtype == "auto" else spec.model.dtype
    if dtype == "bfloat16" and not gpu.bf16:
        if spec.model.dtype == "bfloat16":
            issues.append(
                FieldIssue(
                    "spec.model.dtype", f"{gpu.name} (compute capability {gpu.compute_capability}) has no bfloat16"
                )
            )
        else:
            notes.append(f"{gpu.name} has no bfloat16: serving in float16")
        dtype = "float16"

    quantization = effective_quantization(spec, model)
    if quantization in ("awq", "gptq") and dtype == "bfloat16":
        dtype = "float16"
        notes.append(f"{quantization} kernels compute in float16")

    sizing = spec.sizing
    concurrent = sizing.concurrent_sequences or max_num_seqs
    tokens = sizing.tokens_per_sequence or max_model_len
    if tokens > max_model_len:
        issues.append(
            FieldIssue("spec.sizing.tokensPerSequence", f"{tokens} exceeds the max context ({max_model_len} tokens)")
        )
    if issues:
        raise SpecError(issues)

    return EngineSettings(
        vllm_version=version,
        line=line,
        profile=spec.profile,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=batched,
        block_size=engine.block_size or DEFAULT_BLOCK_SIZE,
        gpu_memory_utilization=engine.gpu_memory_utilization or default_gpu_memory_utilization(line),
        chunked_prefill=chunked,
        prefix_caching=engine.prefix_caching if engine.prefix_caching is not None else True,
        enforce_eager=engine.enforce_eager,
        dtype=dtype,
        kv_cache_dtype=engine.kv_cache_dtype,
        quantization=quantization,
        concurrent_sequences=concurrent,
        tokens_per_sequence=tokens,
        notes=notes,
    )

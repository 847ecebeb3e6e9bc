"""The planner: the smallest valid tensor-parallel size that holds the weights and the workload.

It explains every number, and when nothing fits it says by how much and proposes fixes in a fixed
order (8-bit weights, a shorter context, 4-bit weights, fewer sequences, a bigger GPU), each with
the numbers it would give.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError

from kvpilot.api.v1alpha1 import LLMDeploymentSpec, PlanStatus
from kvpilot.catalog.architecture import ModelArchitecture
from kvpilot.catalog.gpus import GIB, GPU, get_gpu, gpu_catalog
from kvpilot.catalog.models import ResolvedModel
from kvpilot.errors import DoesNotFitError, Fix, SpecError
from kvpilot.sizing.estimator import MemoryEstimate, count_parameters, estimate_memory
from kvpilot.sizing.settings import EngineSettings, resolve_settings

# Cold start of a replica: download at a conservative registry/hub rate, then load and warm up.
DOWNLOAD_BYTES_PER_SECOND = 200 * 1024**2
LOAD_BYTES_PER_SECOND = 2 * GIB
WARMUP_SECONDS = 90  # torch.compile and CUDA-graph capture


def gib(n: float) -> str:
    return f"{n / GIB:.3f} GiB" if abs(n) < 10 * GIB else f"{n / GIB:.2f} GiB"


def kib(n: float) -> str:
    return f"{n / 1024:g} KiB"


class RejectedSize(BaseModel):
    tensor_parallel_size: int
    reason: str


class SizingPlan(BaseModel):
    """The plan for one replica, with the arithmetic that produced it."""

    model: str
    model_source: str
    gpu_type: str
    vllm_version: str
    profile: str
    quantization: str
    dtype: str
    kv_cache_dtype: str
    parameters: int
    tensor_parallel_size: int
    gpus_per_replica: int
    weights_bytes_total: int
    weights_bytes_per_gpu: int
    budget_bytes_per_gpu: int
    non_torch_bytes_per_gpu: int
    activation_bytes_per_gpu: int
    cuda_graph_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    kv_cache_tokens: int
    kv_cache_blocks: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    gpu_memory_utilization: float
    demand_sequences: int
    demand_tokens_per_sequence: int
    max_concurrency: float
    headroom_percent: float
    estimated_startup_seconds: int
    rejected: list[RejectedSize] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    explanation: list[str] = Field(default_factory=list)

    def status(self) -> PlanStatus:
        return PlanStatus(
            gpu_type=self.gpu_type,
            gpus_per_replica=self.gpus_per_replica,
            tensor_parallel_size=self.tensor_parallel_size,
            weights_gib_per_gpu=round(self.weights_bytes_per_gpu / GIB, 2),
            kv_cache_gib_per_gpu=round(self.kv_cache_bytes_per_gpu / GIB, 2),
            kv_bytes_per_token=self.kv_bytes_per_token,
            kv_cache_tokens=self.kv_cache_tokens,
            max_concurrency=round(self.max_concurrency, 2),
            headroom_percent=round(self.headroom_percent, 1),
            explanation=self.explanation,
        )


def valid_tensor_parallel(arch: ModelArchitecture, tp: int) -> str | None:
    """Why vLLM would refuse this tensor-parallel size for the model, or None if it is valid."""
    if arch.num_attention_heads % tp:
        return f"{tp} does not divide the {arch.num_attention_heads} attention heads"
    if arch.attention == "gqa":
        kv = arch.kv_heads
        if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
            return f"{tp} and the {kv} KV heads do not divide one another"
    return None


@dataclass(frozen=True)
class _Attempt:
    tp: int
    estimate: MemoryEstimate
    concurrency: float
    problem: str | None


def _attempt(arch: ModelArchitecture, settings: EngineSettings, gpu: GPU, tp: int, gguf_type: str) -> _Attempt:
    est = estimate_memory(arch, settings, gpu, tp, gguf_type)
    overhead = est.weights_bytes + est.non_torch_bytes + est.activation_bytes + est.cuda_graph_bytes
    demand = settings.concurrent_sequences
    if est.kv_cache_bytes <= 0:
        problem = (
            f"weights and overhead need {gib(overhead)} per GPU, {gib(-est.kv_cache_bytes)} more than the "
            f"{gib(est.budget_bytes)} budget"
        )
        return _Attempt(tp, est, 0.0, problem)
    one_full = est.kv.sequence_bytes_per_gpu(settings.max_model_len, settings.block_size)
    if est.kv_cache_bytes < one_full:
        problem = (
            f"KV cache of {gib(est.kv_cache_bytes)} cannot hold one {settings.max_model_len}-token sequence "
            f"({gib(one_full)}); vLLM would refuse to start"
        )
        return _Attempt(tp, est, 0.0, problem)
    concurrency = est.concurrency(settings.tokens_per_sequence)
    if concurrency < demand:
        needed = est.kv.sequence_bytes_per_gpu(settings.tokens_per_sequence, settings.block_size) * demand
        problem = (
            f"KV cache holds {concurrency:.1f} of the {demand} sequences of {settings.tokens_per_sequence} tokens "
            f"asked ({gib(needed - est.kv_cache_bytes)} per GPU short)"
        )
        return _Attempt(tp, est, concurrency, problem)
    return _Attempt(tp, est, concurrency, None)


def _candidates(spec: LLMDeploymentSpec) -> list[int]:
    count = spec.resources.gpu_count
    if count != "auto":
        return [int(count)]
    return list(range(1, spec.resources.gpus_per_node + 1))


def _search(
    spec: LLMDeploymentSpec, arch: ModelArchitecture, settings: EngineSettings, gpu: GPU
) -> tuple[_Attempt | None, list[_Attempt], list[RejectedSize]]:
    rejected: list[RejectedSize] = []
    attempts: list[_Attempt] = []
    for tp in _candidates(spec):
        invalid = valid_tensor_parallel(arch, tp)
        if invalid:
            if spec.resources.gpu_count != "auto":
                raise SpecError(
                    f"tensor-parallel size {invalid}; pick a count that divides them, or auto",
                    path="spec.resources.gpuCount",
                )
            continue
        attempt = _attempt(arch, settings, gpu, tp, spec.model.gguf_type)
        attempts.append(attempt)
        if attempt.problem is None:
            return attempt, attempts, rejected
        rejected.append(RejectedSize(tensor_parallel_size=tp, reason=attempt.problem))
    return None, attempts, rejected


def _startup_seconds(weights_total: int, weights_per_gpu: int) -> int:
    return int(weights_total / DOWNLOAD_BYTES_PER_SECOND + weights_per_gpu / LOAD_BYTES_PER_SECOND + WARMUP_SECONDS)


def _explain(
    model: ResolvedModel, settings: EngineSettings, gpu: GPU, chosen: _Attempt, rejected: list[RejectedSize]
) -> list[str]:
    arch = model.architecture
    est = chosen.estimate
    params = count_parameters(arch)
    kind = "MLA" if arch.attention == "mla" else ("GQA" if arch.kv_heads < arch.num_attention_heads else "MHA")
    moe = (
        f", MoE {arch.num_experts} experts (top {arch.num_experts_per_tok}, all held in memory)" if arch.is_moe else ""
    )
    window = (
        f", {arch.windowed_layers} of {arch.num_hidden_layers} layers windowed at {arch.sliding_window} tokens"
        if arch.windowed_layers
        else ""
    )
    quant = settings.quantization if settings.quantization != "none" else settings.dtype
    lines = [
        f"model {model.id} ({model.source}): {params.total / 1e9:.2f} B parameters, {kind}{moe}{window}",
        f"weights: {params.quantizable / 1e9:.2f} B in linear layers as {quant}, {params.kept_in_dtype / 1e9:.2f} B "
        f"(embeddings, lm_head, norms) in {settings.dtype} = {gib(est.weights_bytes_total)}; "
        f"÷ TP {chosen.tp} = {gib(est.weights_bytes)} per GPU",
        f"KV cache per token: {est.kv.formula} = {kib(est.kv.bytes_per_token)}"
        + (f" ({kib(est.kv.bytes_per_token_per_gpu)} per GPU at TP {chosen.tp})" if chosen.tp > 1 else ""),
        f"budget per GPU: {gpu.name} {gpu.memory_gib:.2f} GiB × gpu-memory-utilization "
        f"{settings.gpu_memory_utilization:.2f} = {gib(est.budget_bytes)}",
        f"minus weights {gib(est.weights_bytes)}, non-torch {gib(est.non_torch_bytes)}, activation peak "
        f"{gib(est.activation_bytes)} ({settings.max_num_batched_tokens}-token step), CUDA graphs "
        f"{gib(est.cuda_graph_bytes)} = KV cache {gib(est.kv_cache_bytes)} per GPU",
        f"KV cache: {est.kv_blocks} blocks × {settings.block_size} tokens = {est.kv_tokens:,} tokens per replica",
        f"demand: {settings.concurrent_sequences} sequences × {settings.tokens_per_sequence} tokens; fits "
        f"{chosen.concurrency:.1f} at once ({_headroom(chosen, settings):+.0f} % headroom)",
    ]
    for r in rejected:
        lines.append(f"TP {r.tensor_parallel_size} rejected: {r.reason}")
    lines.append(
        f"decision: {chosen.tp} × {gpu.name} per replica, tensor-parallel size {chosen.tp}"
        + (" (smallest that fits)" if rejected else "")
    )
    return lines + settings.notes


def _headroom(attempt: _Attempt, settings: EngineSettings) -> float:
    return (attempt.concurrency / settings.concurrent_sequences - 1) * 100


def plan_resolved(spec: LLMDeploymentSpec, model: ResolvedModel, with_fixes: bool = True) -> SizingPlan:
    """Plan a spec whose model architecture is already resolved (catalog, file, or override)."""
    gpu = get_gpu(spec.resources.gpu_type)
    settings = resolve_settings(spec, model, gpu)
    arch = model.architecture
    if spec.resources.gpu_count != "auto" and int(spec.resources.gpu_count) > spec.resources.gpus_per_node:
        raise SpecError(
            f"{spec.resources.gpu_count} GPUs per replica exceed the {spec.resources.gpus_per_node} GPUs of a node; "
            "kvpilot runs one replica on one node",
            path="spec.resources.gpuCount",
        )
    chosen, attempts, rejected = _search(spec, arch, settings, gpu)
    if chosen is None:
        raise _does_not_fit(spec, model, settings, gpu, attempts, with_fixes)
    est = chosen.estimate
    params = count_parameters(arch)
    return SizingPlan(
        model=model.id,
        model_source=model.source,
        gpu_type=gpu.name,
        vllm_version=settings.vllm_version,
        profile=settings.profile,
        quantization=settings.quantization,
        dtype=settings.dtype,
        kv_cache_dtype=settings.kv_cache_dtype,
        parameters=params.total,
        tensor_parallel_size=chosen.tp,
        gpus_per_replica=chosen.tp,
        weights_bytes_total=est.weights_bytes_total,
        weights_bytes_per_gpu=est.weights_bytes,
        budget_bytes_per_gpu=est.budget_bytes,
        non_torch_bytes_per_gpu=est.non_torch_bytes,
        activation_bytes_per_gpu=est.activation_bytes,
        cuda_graph_bytes_per_gpu=est.cuda_graph_bytes,
        kv_cache_bytes_per_gpu=est.kv_cache_bytes,
        kv_bytes_per_token=est.kv.bytes_per_token,
        kv_bytes_per_token_per_gpu=est.kv.bytes_per_token_per_gpu,
        kv_cache_tokens=est.kv_tokens,
        kv_cache_blocks=est.kv_blocks,
        max_model_len=settings.max_model_len,
        max_num_seqs=settings.max_num_seqs,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        block_size=settings.block_size,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        demand_sequences=settings.concurrent_sequences,
        demand_tokens_per_sequence=settings.tokens_per_sequence,
        max_concurrency=chosen.concurrency,
        headroom_percent=_headroom(chosen, settings),
        estimated_startup_seconds=_startup_seconds(est.weights_bytes_total, est.weights_bytes),
        rejected=rejected,
        notes=settings.notes,
        explanation=_explain(model, settings, gpu, chosen, rejected),
    )


# ------------------------------------------------------------------------------------------------ fixes


def _with(spec: LLMDeploymentSpec, **paths: object) -> LLMDeploymentSpec | None:
    """A copy of the spec with dotted fields changed (``engine.max_model_len=4096``); None when the change
    makes it invalid (fp8 weights with a float32 dtype, say), so that fix is simply not offered."""
    data = spec.model_dump()
    for dotted, value in paths.items():
        target = data
        *parents, leaf = dotted.split("__")
        for p in parents:
            target = target[p]
        target[leaf] = value
    try:
        return LLMDeploymentSpec.model_validate(data)
    except ValidationError:
        return None


def _try(spec: LLMDeploymentSpec | None, model: ResolvedModel) -> SizingPlan | None:
    if spec is None:
        return None
    try:
        return plan_resolved(spec, model, with_fixes=False)
    except SpecError:
        return None


def _summary(plan: SizingPlan) -> str:
    return (
        f"TP {plan.tensor_parallel_size}, {plan.kv_cache_tokens:,} KV tokens, "
        f"{plan.max_concurrency:.1f} × {plan.demand_tokens_per_sequence}-token sequences"
    )


def _fixes(
    spec: LLMDeploymentSpec, model: ResolvedModel, settings: EngineSettings, gpu: GPU, best: _Attempt | None
) -> list[Fix]:
    fixes: list[Fix] = []
    auto = _with(spec, resources__gpu_count="auto")
    if auto is None:
        return fixes
    unquantized = settings.quantization == "none" and model.checkpoint_quantization in (None, "none")

    # A quantized checkpoint of the same architecture is what a fix proposes; plan as if it existed.
    any_checkpoint = model.model_copy(update={"checkpoint_quantization": None})
    if unquantized:
        if gpu.fp8 or gpu.ampere_or_newer:
            method, title = "fp8", "8-bit weights: model.quantization fp8 (quantized at load"
            title += ")" if gpu.fp8 else ", weight-only on this GPU)"
        else:
            method, title = "int8", "8-bit weights: a W8A8 INT8 checkpoint (model.quantization int8)"
        plan = _try(_with(auto, model__quantization=method), any_checkpoint)
        if plan:
            fixes.append(Fix(title, _summary(plan)))

    if settings.max_model_len > 1024 and best is not None and best.estimate.kv_cache_bytes > 0:
        per_token = best.estimate.kv.bytes_per_token_per_gpu
        fit_tokens = best.estimate.kv_cache_bytes // per_token // settings.concurrent_sequences
        shorter = (fit_tokens // 1024) * 1024
        if 1024 <= shorter < settings.max_model_len:
            plan = _try(_with(auto, engine__max_model_len=shorter, sizing__tokens_per_sequence=None), model)
            if plan:
                fixes.append(Fix(f"shorter context: engine.maxModelLen {shorter}", _summary(plan)))

    if unquantized:
        plan = _try(_with(auto, model__quantization="awq"), any_checkpoint)
        if plan:
            fixes.append(Fix("4-bit weights: an AWQ or GPTQ checkpoint (model.quantization awq)", _summary(plan)))

    if best is not None and best.concurrency >= 1:
        fewer = int(best.concurrency)
        plan = _try(_with(auto, sizing__concurrent_sequences=fewer, engine__max_num_seqs=fewer), model)
        if plan:
            fixes.append(Fix(f"fewer concurrent sequences: engine.maxNumSeqs {fewer}", _summary(plan)))

    for other in sorted(gpu_catalog().values(), key=lambda g: g.memory_gib):
        if other.memory_gib <= gpu.memory_gib or other.vendor != gpu.vendor:
            continue
        plan = _try(_with(auto, resources__gpu_type=other.name), model)
        if plan:
            fixes.append(Fix(f"a bigger GPU: resources.gpuType {other.name}", _summary(plan)))
            break
    if spec.resources.gpu_count != "auto":
        plan = _try(auto, model)
        if plan:
            fixes.append(Fix("more GPUs: resources.gpuCount auto", _summary(plan)))
    elif not fixes:
        fixes.append(
            Fix(
                "more GPUs than one node has",
                f"no tensor-parallel size up to {spec.resources.gpus_per_node} fits; kvpilot does not span nodes",
            )
        )
    return fixes


def _does_not_fit(
    spec: LLMDeploymentSpec,
    model: ResolvedModel,
    settings: EngineSettings,
    gpu: GPU,
    attempts: list[_Attempt],
    with_fixes: bool,
) -> DoesNotFitError:
    best = max(attempts, key=lambda a: (a.estimate.kv_cache_bytes, a.tp)) if attempts else None
    if best is None:
        message = f"no tensor-parallel size up to {spec.resources.gpus_per_node} is valid for {model.id}"
    else:
        message = f"{model.id} does not fit {best.tp} × {gpu.name}: {best.problem}."
    fixes = _fixes(spec, model, settings, gpu, best) if with_fixes else []
    return DoesNotFitError(message, path="spec.resources", fixes=fixes)

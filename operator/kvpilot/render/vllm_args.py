"""The vLLM command line for one replica, checked against the flag table of the target version."""

from __future__ import annotations

import json
import re

from kvpilot.api.v1alpha1 import LLMDeploymentSpec
from kvpilot.catalog.gpus import GPU
from kvpilot.errors import FieldIssue, RenderError
from kvpilot.render.flags import (
    block_size_choices,
    flag_problem,
    kv_cache_dtype_choices,
    negative_flag,
    quantization_methods,
    takes_value,
)
from kvpilot.sizing.planner import SizingPlan
from kvpilot.sizing.settings import EngineSettings

# Flags whose value kvpilot derives from the spec and the plan; extraArgs may not set them.
OWNED_FLAGS: dict[str, str] = {
    "--model": "spec.model.id",
    "--served-model-name": "spec.model.servedName",
    "--host": "kvpilot (pods listen on all interfaces)",
    "--port": "spec.engine.port",
    "--tensor-parallel-size": "spec.resources.gpuCount (the planner picks it)",
    "-tp": "spec.resources.gpuCount (the planner picks it)",
    "--pipeline-parallel-size": "kvpilot (a replica runs on one node)",
    "-pp": "kvpilot (a replica runs on one node)",
    "--data-parallel-size": "spec.replicas / spec.autoscaling",
    "-dp": "spec.replicas / spec.autoscaling",
    "--max-model-len": "spec.engine.maxModelLen",
    "--max-num-seqs": "spec.engine.maxNumSeqs",
    "--max-num-batched-tokens": "spec.engine.maxNumBatchedTokens",
    "--block-size": "spec.engine.blockSize",
    "--gpu-memory-utilization": "spec.engine.gpuMemoryUtilization",
    "--device-memory-utilization": "spec.engine.gpuMemoryUtilization",
    "--kv-cache-dtype": "spec.engine.kvCacheDtype",
    "--dtype": "spec.model.dtype",
    "--quantization": "spec.model.quantization",
    "-q": "spec.model.quantization",
    "--enable-prefix-caching": "spec.engine.prefixCaching",
    "--no-enable-prefix-caching": "spec.engine.prefixCaching",
    "--disable-prefix-caching": "spec.engine.prefixCaching",
    "--enable-chunked-prefill": "spec.engine.chunkedPrefill",
    "--no-enable-chunked-prefill": "spec.engine.chunkedPrefill",
    "--disable-chunked-prefill": "spec.engine.chunkedPrefill",
    "--speculative-config": "spec.engine.speculative",
    "-sc": "spec.engine.speculative",
    "--revision": "spec.model.revision",
    "--download-dir": "kvpilot (the model cache volume)",
    "--trust-remote-code": "spec.model.trustRemoteCode",
    "--enforce-eager": "spec.engine.enforceEager",
    "--kv-cache-memory-bytes": "the planner (it would void the sizing plan)",
    "--num-gpu-blocks-override": "the planner (it would void the sizing plan)",
    "--cpu-offload-gb": "the planner (offload is not modelled; it would void the sizing plan)",
}
SECRET_FLAGS: dict[str, str] = {
    "--api-key": "spec.engine.apiKeySecretRef",
    "--hf-token": "spec.model.tokenSecretRef",
}
# Values shaped like credentials: Hugging Face tokens, OpenAI-style keys, bearer strings.
SECRET_VALUE = re.compile(r"(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|Bearer\s+\S{10,})")


def served_model_name(spec: LLMDeploymentSpec) -> str:
    return spec.model.served_name or spec.model.id


def _quantization_flag(settings: EngineSettings, gpu: GPU) -> str | None:
    q = settings.quantization
    if q == "none":
        return None
    if q in ("awq", "gptq") and gpu.ampere_or_newer:
        return f"{q}_marlin"  # forcing plain awq/gptq would pick the slow kernel on sm80+
    if q == "int8":
        return "compressed-tensors"
    return q


def check_extra_args(args: list[str], settings: EngineSettings) -> list[FieldIssue]:
    """Every problem with spec.engine.extraArgs for the target vLLM, each with its index."""
    issues: list[FieldIssue] = []
    expecting_value_for: str | None = None
    for i, arg in enumerate(args):
        path = f"spec.engine.extraArgs[{i}]"
        if SECRET_VALUE.search(arg):
            issues.append(FieldIssue(path, "looks like a credential; pass secrets through a secretKeyRef"))
            expecting_value_for = None
            continue
        if expecting_value_for is not None and not arg.startswith("-"):
            expecting_value_for = None
            continue
        expecting_value_for = None
        if not arg.startswith("-"):
            issues.append(FieldIssue(path, f"{arg!r} is not a flag and follows no flag that takes a value"))
            continue
        if re.search(r"\s-", arg):
            # No shell runs these, so this is not an injection; but vLLM would read it as one odd value.
            issues.append(FieldIssue(path, f"{arg!r} holds more than one flag; give each flag its own list item"))
            continue
        name, has_inline_value, _ = arg.partition("=")
        if name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")  # vLLM accepts --max_model_len too
        if name in SECRET_FLAGS:
            issues.append(FieldIssue(path, f"{name} would put a secret in the pod spec; use {SECRET_FLAGS[name]}"))
            continue
        if name in OWNED_FLAGS:
            issues.append(FieldIssue(path, f"{name} is set by kvpilot from {OWNED_FLAGS[name]}"))
            continue
        problem = flag_problem(name, settings.line)
        if problem:
            issues.append(FieldIssue(path, problem))
            continue
        if takes_value(name, settings.line) and not has_inline_value:
            expecting_value_for = name
    return issues


def render_vllm_args(spec: LLMDeploymentSpec, plan: SizingPlan, settings: EngineSettings, gpu: GPU) -> list[str]:
    """The arguments after ``vllm serve``: the model, then every flag kvpilot owns, then extraArgs."""
    line = settings.line
    issues: list[FieldIssue] = []
    choices = block_size_choices(line)
    if settings.block_size % 16:
        # FlashAttention, vLLM's default attention backend on NVIDIA GPUs, refuses any other size.
        issues.append(FieldIssue("spec.engine.blockSize", f"{settings.block_size} is not a multiple of 16"))
    elif choices is not None and settings.block_size not in choices:
        issues.append(
            FieldIssue("spec.engine.blockSize", f"vLLM {line} accepts block sizes {', '.join(map(str, choices))}")
        )
    if settings.kv_cache_dtype not in kv_cache_dtype_choices(line):
        issues.append(
            FieldIssue(
                "spec.engine.kvCacheDtype",
                f"vLLM {line} accepts {', '.join(kv_cache_dtype_choices(line))}",
            )
        )
    quant = _quantization_flag(settings, gpu)
    if quant is not None and quant not in quantization_methods(line):
        issues.append(
            FieldIssue(
                "spec.model.quantization",
                f"vLLM {line} has no built-in {quant} support; use vLLM 0.32 or older, or another method",
            )
        )
    issues += check_extra_args(spec.engine.extra_args, settings)
    if issues:
        raise RenderError(issues)

    args = [
        spec.model.id,
        "--served-model-name",
        served_model_name(spec),
        "--host",
        "0.0.0.0",
        "--port",
        str(spec.engine.port),
        "--tensor-parallel-size",
        str(plan.tensor_parallel_size),
        "--max-model-len",
        str(settings.max_model_len),
        "--max-num-seqs",
        str(settings.max_num_seqs),
        "--max-num-batched-tokens",
        str(settings.max_num_batched_tokens),
        "--block-size",
        str(settings.block_size),
        "--gpu-memory-utilization",
        f"{settings.gpu_memory_utilization:g}",
        "--dtype",
        settings.dtype,
    ]
    if quant is not None:
        args += ["--quantization", quant]
    if settings.kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", settings.kv_cache_dtype]
    args.append("--enable-prefix-caching" if settings.prefix_caching else negative_flag("prefix-caching", line))
    args.append("--enable-chunked-prefill" if settings.chunked_prefill else negative_flag("chunked-prefill", line))
    if settings.enforce_eager:
        args.append("--enforce-eager")
    if spec.model.revision:
        args += ["--revision", spec.model.revision]
    if spec.model.trust_remote_code:
        args.append("--trust-remote-code")
    spec_dec = spec.engine.speculative
    if spec_dec is not None:
        config: dict[str, object] = {
            "method": spec_dec.method,
            "num_speculative_tokens": spec_dec.num_speculative_tokens,
        }
        if spec_dec.model:
            config["model"] = spec_dec.model
        if spec_dec.prompt_lookup_max:
            config["prompt_lookup_max"] = spec_dec.prompt_lookup_max
        args += ["--speculative-config", json.dumps(config, separators=(",", ":"), sort_keys=True)]
    args += spec.engine.extra_args

    # Defence in depth: every flag kvpilot itself wrote must exist in the target version.
    for arg in args[1:]:
        if arg.startswith("--"):
            problem = flag_problem(arg.split("=", 1)[0], line)
            if problem:
                raise RenderError(problem, path="spec.engine")
    return args

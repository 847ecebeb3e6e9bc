"""The estimator against hand-checked figures.

KV bytes per token are worked out by hand from each model's config.json (the arithmetic is in each
row); weight sizes are checked against the published checkpoint sizes on the hub (safetensors or
GGUF file totals), an independent figure.
"""

from __future__ import annotations

import pytest

from kvpilot.catalog.gpus import GIB, get_gpu
from kvpilot.catalog.models import lookup_model
from kvpilot.sizing.estimator import (
    count_parameters,
    estimate_memory,
    kv_layout,
    weight_bytes,
)
from kvpilot.sizing.settings import resolve_settings

from .helpers import spec

KIB = 1024

# (model, KV bytes per token in the model dtype, the hand arithmetic)
KV_PER_TOKEN = [
    ("meta-llama/Meta-Llama-3-8B-Instruct", 131072, "2 × 32 layers × 8 KV heads × 128 × 2 B (GQA)"),
    ("meta-llama/Meta-Llama-3-70B-Instruct", 327680, "2 × 80 × 8 × 128 × 2"),
    ("meta-llama/Llama-3.1-405B-Instruct", 516096, "2 × 126 × 8 × 128 × 2"),
    ("Qwen/Qwen2.5-7B-Instruct", 57344, "2 × 28 × 4 × 128 × 2"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 131072, "2 × 32 × 8 × 128 × 2 (MoE: KV is per layer, not per expert)"),
    ("google/gemma-2-9b-it", 344064, "2 × 42 × 8 × 256 × 2 (head_dim 256)"),
    ("microsoft/Phi-3-mini-4k-instruct", 393216, "2 × 32 × 32 × 96 × 2 (no GQA)"),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", 31104, "27 layers × (512 + 64) × 2 (MLA latent)"),
    ("deepseek-ai/DeepSeek-V3", 70272, "61 × (512 + 64) × 2 (MLA latent)"),
]


@pytest.mark.parametrize(("model_id", "expected", "arithmetic"), KV_PER_TOKEN)
def test_kv_bytes_per_token(model_id: str, expected: int, arithmetic: str) -> None:
    model = lookup_model(model_id)
    assert model is not None
    assert kv_layout(model.architecture, 2, 1).bytes_per_token == expected, arithmetic


def test_llama3_8b_is_128_kib_per_token_not_the_naive_512() -> None:
    arch = lookup_model("meta-llama/Meta-Llama-3-8B-Instruct").architecture  # type: ignore[union-attr]
    assert kv_layout(arch, 2, 1).bytes_per_token == 128 * KIB
    naive = 2 * arch.num_hidden_layers * arch.num_attention_heads * arch.head_size * 2
    assert naive == 512 * KIB


def test_kv_split_by_tensor_parallel_for_gqa_but_not_mla() -> None:
    llama = lookup_model("meta-llama/Meta-Llama-3-70B-Instruct").architecture  # type: ignore[union-attr]
    assert kv_layout(llama, 2, 4).bytes_per_token_per_gpu == 327680 // 4
    # TP 16 > 8 KV heads: vLLM replicates, each rank keeps one head.
    assert kv_layout(llama, 2, 16).bytes_per_token_per_gpu == 2 * 80 * 1 * 128 * 2
    mla = lookup_model("deepseek-ai/DeepSeek-V2-Lite-Chat").architecture  # type: ignore[union-attr]
    assert kv_layout(mla, 2, 4).bytes_per_token_per_gpu == 31104


def test_fp8_kv_cache_halves_kv_bytes() -> None:
    arch = lookup_model("meta-llama/Meta-Llama-3-8B-Instruct").architecture  # type: ignore[union-attr]
    assert kv_layout(arch, 1, 1).bytes_per_token == 64 * KIB


def test_sliding_window_caps_windowed_layers() -> None:
    gemma = lookup_model("google/gemma-2-9b-it").architecture  # type: ignore[union-attr]
    layout = kv_layout(gemma, 2, 1)
    per_layer = 2 * 8 * 256 * 2
    # 8192 tokens: 21 full layers hold all 512 blocks, 21 windowed layers stop at 4096/16 + 1 = 257 blocks.
    assert layout.sequence_bytes_per_gpu(8192, 16) == (21 * 512 + 21 * 257) * 16 * per_layer
    # Below the window both kinds hold the same.
    assert layout.sequence_bytes_per_gpu(1024, 16) == 42 * 64 * 16 * per_layer
    mistral = lookup_model("mistralai/Mistral-7B-v0.1").architecture  # type: ignore[union-attr]
    assert kv_layout(mistral, 2, 1).windowed_layers == 32


# (model id, quantization, published checkpoint size in bytes, where the figure comes from)
CHECKPOINT_SIZES = [
    ("meta-llama/Meta-Llama-3-8B-Instruct", "none", 16.06e9, "4 safetensors shards, bf16"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "none", 93.4e9, "19 safetensors shards, bf16"),
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", "awq", 5.58e9, "2 safetensors shards, AWQ 4-bit g128"),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", "fp8", 72.7e9, "15 safetensors shards, fp8 linear layers"),
    ("Qwen/Qwen2.5-7B-Instruct-GGUF", "gguf", 4.68e9, "qwen2.5-7b-instruct-q4_k_m.gguf"),
    ("meta-llama/Meta-Llama-3-8B", "bitsandbytes", 5.70e9, "unsloth llama-3-8b-bnb-4bit, NF4 double-quant"),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "none", 31.4e9, "4 safetensors shards, bf16"),
]


@pytest.mark.parametrize(("model_id", "quant", "published", "source"), CHECKPOINT_SIZES)
def test_weights_match_published_checkpoint_sizes(model_id: str, quant: str, published: float, source: str) -> None:
    model = lookup_model(model_id)
    assert model is not None
    if quant == "bitsandbytes":
        model = model.model_copy(update={"checkpoint_quantization": "none"})
    s = spec(model_id, "H100-80GB-SXM", model={"quantization": quant if quant != "none" else "none"})
    settings = resolve_settings(s, model, get_gpu("H100-80GB-SXM"))
    estimated = weight_bytes(count_parameters(model.architecture), settings)
    assert abs(estimated / published - 1) < 0.03, f"{estimated / 1e9:.2f} GB vs {published / 1e9:.2f} GB ({source})"


def test_llama3_8b_fp16_weights_about_15_gib() -> None:
    model = lookup_model("meta-llama/Meta-Llama-3-8B-Instruct")
    assert model is not None
    s = spec(model={"dtype": "float16"})
    settings = resolve_settings(s, model, get_gpu("H100-80GB-SXM"))
    est = estimate_memory(model.architecture, settings, get_gpu("H100-80GB-SXM"), 1)
    assert est.weights_bytes_total == 8_030_261_248 * 2
    assert 14.9 < est.weights_bytes_total / GIB < 15.0


def test_moe_counts_every_expert() -> None:
    mixtral = lookup_model("mistralai/Mixtral-8x7B-Instruct-v0.1").architecture  # type: ignore[union-attr]
    params = count_parameters(mixtral)
    assert params.experts == 32 * 8 * 3 * 4096 * 14336
    assert params.total > 46e9  # not the ~13B that run per token


def test_estimator_counts_match_model_cards() -> None:
    from kvpilot.catalog.models import model_catalog

    for entry in model_catalog().values():
        counted = count_parameters(entry.architecture).total / 1e9
        assert abs(counted / entry.published_parameters_b - 1) < 0.01, entry.id


def test_gpu_memory_utilization_applies_to_total_memory() -> None:
    model = lookup_model("meta-llama/Meta-Llama-3-8B-Instruct")
    assert model is not None
    gpu = get_gpu("A100-80GB")
    s = spec(gpu="A100-80GB", engine={"gpuMemoryUtilization": 0.5})
    est = estimate_memory(model.architecture, resolve_settings(s, model, gpu), gpu, 1)
    assert est.budget_bytes == pytest.approx(gpu.memory_bytes * 0.5, abs=1)
    total = est.weights_bytes + est.non_torch_bytes + est.activation_bytes + est.cuda_graph_bytes + est.kv_cache_bytes
    assert total == est.budget_bytes


def test_version_defaults_change_the_budget() -> None:
    model = lookup_model("meta-llama/Meta-Llama-3-8B-Instruct")
    assert model is not None
    gpu = get_gpu("H100-80GB-SXM")
    old = resolve_settings(spec(engine={"image": "vllm/vllm-openai:v0.19.1"}), model, gpu)
    new = resolve_settings(spec(engine={"image": "vllm/vllm-openai:v0.21.0"}), model, gpu)
    assert (old.gpu_memory_utilization, new.gpu_memory_utilization) == (0.90, 0.92)
    old_est = estimate_memory(model.architecture, old, gpu, 1)
    new_est = estimate_memory(model.architecture, new, gpu, 1)
    assert old_est.cuda_graph_bytes == 0 and new_est.cuda_graph_bytes > 0

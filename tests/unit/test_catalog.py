"""Catalogs, local config.json loading, and the hub fetch (over a mock transport)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from kvpilot.catalog.architecture import architecture_from_hf_config
from kvpilot.catalog.gpus import get_gpu, gpu_catalog
from kvpilot.catalog.hub import fetch_hub_config
from kvpilot.catalog.models import load_local_config, model_catalog, resolve_model
from kvpilot.errors import CatalogError, TransientError

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}


def test_catalog_sizes() -> None:
    assert len(gpu_catalog()) >= 12
    assert len(model_catalog()) >= 15
    for name in (
        "T4",
        "A10G",
        "L4",
        "L40S",
        "A100-40GB",
        "A100-80GB",
        "H100-80GB-SXM",
        "H100-80GB-PCIe",
        "H200",
        "B200",
        "RTX-4090",
        "MI300X",
    ):
        assert get_gpu(name).memory_gib > 0


def test_gpu_lookup_by_node_label_value() -> None:
    assert get_gpu("NVIDIA-H100-80GB-HBM3").name == "H100-80GB-SXM"
    with pytest.raises(CatalogError, match="known: T4"):
        get_gpu("V100")


def test_local_config_json_file_and_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    for where in (tmp_path, tmp_path / "config.json"):
        model = load_local_config(where)
        assert model.architecture.kv_heads == 8
        assert model.source.startswith("file:")
    assert resolve_model(str(tmp_path)).architecture.hidden_size == 4096


def test_config_missing_fields_are_named(tmp_path: Path) -> None:
    broken = {k: v for k, v in LLAMA_CONFIG.items() if k not in ("num_hidden_layers", "vocab_size")}
    (tmp_path / "config.json").write_text(json.dumps(broken))
    with pytest.raises(CatalogError) as err:
        load_local_config(tmp_path)
    assert "num_hidden_layers" in str(err.value) and "vocab_size" in str(err.value)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(CatalogError, match="not valid JSON"):
        load_local_config(tmp_path)


def test_hf_config_translations() -> None:
    gemma = architecture_from_hf_config(
        {**LLAMA_CONFIG, "architectures": ["Gemma2ForCausalLM"], "sliding_window": 4096, "num_hidden_layers": 42}
    )
    assert gemma.windowed_layers == 21
    qwen = architecture_from_hf_config({**LLAMA_CONFIG, "architectures": ["Qwen2ForCausalLM"], "sliding_window": 4096})
    assert qwen.windowed_layers == 0 and qwen.attention_bias
    mla = architecture_from_hf_config(
        {
            **LLAMA_CONFIG,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
            "n_routed_experts": 64,
            "num_experts_per_tok": 6,
            "quantization_config": {"quant_method": "fp8"},
        }
    )
    assert mla.attention == "mla" and mla.num_experts == 64 and mla.native_quantization == "fp8"


def _client(status: int, body: object, seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=body)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_hub_fetch_sends_the_token_and_parses() -> None:
    seen: list[httpx.Request] = []
    model = fetch_hub_config("acme/llm", "v2", token="secret-token", client=_client(200, LLAMA_CONFIG, seen))
    assert model.architecture.num_hidden_layers == 32
    assert seen[0].url.path == "/acme/llm/resolve/v2/config.json"
    assert seen[0].headers["authorization"] == "Bearer secret-token"


@pytest.mark.parametrize(
    ("status", "error", "needle"),
    [
        (401, CatalogError, "gated or private"),
        (404, CatalogError, "404"),
        (503, TransientError, "503"),
        (429, TransientError, "429"),
    ],
)
def test_hub_fetch_errors(status: int, error: type[Exception], needle: str) -> None:
    with pytest.raises(error, match=needle):
        fetch_hub_config("acme/llm", client=_client(status, {}, []))


def test_hub_unreachable_is_transient() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no route", request=request)

    with pytest.raises(TransientError):
        fetch_hub_config("acme/llm", client=httpx.Client(transport=httpx.MockTransport(handler)))

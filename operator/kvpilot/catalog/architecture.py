"""The facts about a transformer that the VRAM estimator needs, read from a Hugging Face config.json."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from kvpilot.api.base import ApiModel
from kvpilot.errors import CatalogError

AttentionKind = Literal["gqa", "mla"]
PosInt = Annotated[int, Field(ge=1, le=10_000_000)]


class ModelArchitecture(ApiModel):
    """Architecture facts used for sizing (the subset of a Hugging Face config.json that decides memory)."""

    architecture: str = Field(
        "LlamaForCausalLM", max_length=128, description="Model class from config.json `architectures[0]`."
    )
    num_hidden_layers: PosInt = Field(description="Transformer layers (config.json `num_hidden_layers`).")
    hidden_size: PosInt = Field(description="Model width (config.json `hidden_size`).")
    num_attention_heads: PosInt = Field(description="Query heads (config.json `num_attention_heads`).")
    num_key_value_heads: PosInt | None = Field(
        None, description="KV heads for grouped-query attention; equals the query heads when absent."
    )
    head_dim: PosInt | None = Field(None, description="Per-head size; hiddenSize / numAttentionHeads when absent.")
    intermediate_size: PosInt = Field(description="MLP width of dense layers (config.json `intermediate_size`).")
    vocab_size: PosInt = Field(description="Vocabulary size (config.json `vocab_size`).")
    max_position_embeddings: PosInt = Field(description="Longest context the model was trained for.")
    tie_word_embeddings: bool = Field(False, description="Whether lm_head shares the embedding matrix.")
    attention_bias: bool = Field(False, description="Whether q/k/v projections carry biases (Qwen2).")
    torch_dtype: Literal["bfloat16", "float16", "float32", "float8_e4m3fn"] = Field(
        "bfloat16", description="Dtype the checkpoint is stored in."
    )
    sliding_window: PosInt | None = Field(None, description="Sliding-window size of windowed layers, if any.")
    sliding_window_layers: int | None = Field(
        None,
        ge=0,
        description="How many layers use the sliding window (all layers when slidingWindow is set and this "
        "is absent; Gemma 2 alternates, so half).",
    )
    # Mixture of experts
    num_experts: int = Field(0, ge=0, le=4096, description="Routed experts per MoE layer; 0 for dense models.")
    num_experts_per_tok: int = Field(0, ge=0, le=256, description="Experts each token is routed to.")
    num_shared_experts: int = Field(0, ge=0, le=64, description="Always-active shared experts (DeepSeek).")
    moe_intermediate_size: PosInt | None = Field(
        None, description="MLP width of one expert; intermediateSize when absent (Mixtral)."
    )
    first_k_dense_layers: int = Field(0, ge=0, description="Leading layers with a dense MLP in an MoE model.")
    # Multi-head latent attention (DeepSeek-V2/V3)
    kv_lora_rank: PosInt | None = Field(None, description="MLA compressed KV latent size; set only for MLA.")
    q_lora_rank: PosInt | None = Field(None, description="MLA query low-rank size, if the query is compressed.")
    qk_rope_head_dim: PosInt | None = Field(None, description="MLA rotary part of each head.")
    qk_nope_head_dim: PosInt | None = Field(None, description="MLA non-rotary part of each query/key head.")
    v_head_dim: PosInt | None = Field(None, description="MLA value head size.")
    native_quantization: Literal["fp8"] | None = Field(
        None, description="Quantization the published checkpoint already has (DeepSeek-V3 ships fp8)."
    )

    @property
    def attention(self) -> AttentionKind:
        return "mla" if self.kv_lora_rank else "gqa"

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def windowed_layers(self) -> int:
        if not self.sliding_window:
            return 0
        if self.sliding_window_layers is None:
            return self.num_hidden_layers
        return min(self.sliding_window_layers, self.num_hidden_layers)


# config.json key → our field; the first key present wins.
_HF_KEYS: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "multi_query_group_num"),
    "head_dim": ("head_dim",),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "seq_length"),
    "tie_word_embeddings": ("tie_word_embeddings",),
    "attention_bias": ("attention_bias",),
    "torch_dtype": ("torch_dtype", "dtype"),
    "sliding_window": ("sliding_window",),
    "num_experts": ("num_local_experts", "n_routed_experts", "num_experts"),
    "num_experts_per_tok": ("num_experts_per_tok", "moe_topk"),
    "num_shared_experts": ("n_shared_experts", "num_shared_experts"),
    "moe_intermediate_size": ("moe_intermediate_size",),
    "first_k_dense_layers": ("first_k_dense_replace",),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
}
_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
# Architectures whose windowed layers alternate with full-attention ones.
_ALTERNATING_WINDOW = {"Gemma2ForCausalLM", "Gemma3ForCausalLM", "Cohere2ForCausalLM"}
# Architectures whose config carries sliding_window but whose vLLM implementation ignores it.
_WINDOW_IGNORED = {"Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM"}
_QKV_BIAS = {"Qwen2ForCausalLM", "Qwen2MoeForCausalLM"}


def architecture_from_hf_config(config: dict[str, Any], source: str = "config.json") -> ModelArchitecture:
    """Translate a Hugging Face config.json into the estimator's facts, naming anything missing."""
    if "text_config" in config and "num_hidden_layers" not in config:
        config = {**config["text_config"], "architectures": config.get("architectures")}
    found: dict[str, Any] = {}
    for ours, keys in _HF_KEYS.items():
        for key in keys:
            if config.get(key) is not None:
                found[ours] = config[key]
                break
    missing = [_HF_KEYS[f][0] for f in _REQUIRED if f not in found]
    if missing:
        raise CatalogError(
            f"{source} lacks {', '.join(missing)}: the estimator needs them to size the model; "
            "give spec.model.architecture explicitly or point at a complete config.json",
            path="spec.model",
        )
    archs = config.get("architectures") or ["LlamaForCausalLM"]
    found["architecture"] = archs[0]
    found.setdefault("max_position_embeddings", 4096)
    if found.get("torch_dtype") not in ("bfloat16", "float16", "float32", "float8_e4m3fn"):
        found["torch_dtype"] = "bfloat16"
    if found["architecture"] in _QKV_BIAS:
        found["attention_bias"] = True
    if found["architecture"] in _WINDOW_IGNORED or config.get("use_sliding_window") is False:
        found.pop("sliding_window", None)
    if found.get("sliding_window") and found["architecture"] in _ALTERNATING_WINDOW:
        found["sliding_window_layers"] = found["num_hidden_layers"] // 2
    if config.get("quantization_config", {}).get("quant_method") == "fp8":
        found["native_quantization"] = "fp8"
    try:
        return ModelArchitecture.model_validate(found)
    except ValueError as exc:
        raise CatalogError(f"{source} has values the estimator cannot use: {exc}", path="spec.model") from exc

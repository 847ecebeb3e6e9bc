"""The VRAM estimator: weights, KV cache per token, runtime overhead and what is left for the KV cache.

Everything is per GPU of one replica unless a name says otherwise, because that is how vLLM decides:
each tensor-parallel worker takes ``total_memory × gpu_memory_utilization`` of its own GPU, subtracts
what it measured for weights, non-torch memory, the activation peak of a profile run and (since 0.21)
CUDA graphs, and gives the rest to the KV cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvpilot.catalog.architecture import ModelArchitecture
from kvpilot.catalog.gpus import GIB, GPU
from kvpilot.sizing.settings import EngineSettings, subtracts_cuda_graphs
from kvpilot.versions import VersionLine

# Runtime overheads per GPU that vLLM measures rather than derives. Calibrated on the start-up logs in
# tests/data/vllm_reported_memory.yaml: "non-torch forward increase memory" is 0.25 GiB at TP 1 and
# 2.07-2.09 GiB at TP 2 (Llama-3.1-8B, Mixtral, Qwen2.5-72B on H100, vLLM 0.19); 0.35 GiB at TP 1 on V0.
NON_TORCH_BYTES = int(0.35 * GIB)  # cuBLAS workspaces and allocator slack outside torch's pool
NON_TORCH_TP_EXTRA_BYTES = int(1.75 * GIB)  # NCCL and custom all-reduce buffers when TP > 1
CUDA_GRAPH_BASE_BYTES = int(0.25 * GIB)
CUDA_GRAPH_MAX_CAPTURE = 512  # vLLM captures batch sizes up to min(2 × maxNumSeqs, 512)

# Bits per weight of 4-bit and GGUF methods, including their per-group scale and zero overhead.
# AWQ/GPTQ: 4 bits + an fp16 scale and a packed 4-bit zero per group of 128 = 4 + 20/128 bits.
GROUP_SIZE = 128
INT4_GROUP_BITS = 4 + (16 + 4) / GROUP_SIZE
# bitsandbytes NF4 with double quantization: 4 bits + an 8-bit absmax per 64 + an fp32 per 256 blocks.
NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)
GGUF_BITS = {"Q4_0": 4.5, "Q4_K_M": 4.85, "Q5_K_M": 5.69, "Q6_K": 6.5625, "Q8_0": 8.5}


@dataclass(frozen=True)
class ParameterCount:
    """Parameters by role; quantization applies to the transformer blocks' linear layers only."""

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    experts: int
    router: int
    norms_and_biases: int

    @property
    def quantizable(self) -> int:
        return self.attention + self.dense_mlp + self.experts

    @property
    def kept_in_dtype(self) -> int:
        return self.embedding + self.lm_head + self.router + self.norms_and_biases

    @property
    def total(self) -> int:
        return self.quantizable + self.kept_in_dtype


def count_parameters(arch: ModelArchitecture) -> ParameterCount:
    h, layers = arch.hidden_size, arch.num_hidden_layers
    heads, kv_heads, d = arch.num_attention_heads, arch.kv_heads, arch.head_size
    embedding = arch.vocab_size * h
    lm_head = 0 if arch.tie_word_embeddings else arch.vocab_size * h

    if arch.attention == "mla":
        assert arch.kv_lora_rank and arch.qk_rope_head_dim and arch.qk_nope_head_dim and arch.v_head_dim
        q_head = arch.qk_nope_head_dim + arch.qk_rope_head_dim
        if arch.q_lora_rank:
            q_proj = h * arch.q_lora_rank + arch.q_lora_rank * heads * q_head
        else:
            q_proj = h * heads * q_head
        kv_proj = h * (arch.kv_lora_rank + arch.qk_rope_head_dim) + arch.kv_lora_rank * heads * (
            arch.qk_nope_head_dim + arch.v_head_dim
        )
        o_proj = heads * arch.v_head_dim * h
        attention_per_layer = q_proj + kv_proj + o_proj
        norms_per_layer = 2 * h + arch.kv_lora_rank + (arch.q_lora_rank or 0)
    else:
        attention_per_layer = h * heads * d + 2 * h * kv_heads * d + heads * d * h
        norms_per_layer = 2 * h
    bias_per_layer = (heads + 2 * kv_heads) * d if arch.attention_bias else 0

    gated_mlp = 3 * h * arch.intermediate_size
    if arch.is_moe:
        expert_width = arch.moe_intermediate_size or arch.intermediate_size
        moe_layers = layers - arch.first_k_dense_layers
        experts = moe_layers * (arch.num_experts + arch.num_shared_experts) * 3 * h * expert_width
        router = moe_layers * h * arch.num_experts
        dense_mlp = arch.first_k_dense_layers * gated_mlp
    else:
        experts = router = 0
        dense_mlp = layers * gated_mlp
    return ParameterCount(
        embedding=embedding,
        lm_head=lm_head,
        attention=layers * attention_per_layer,
        dense_mlp=dense_mlp,
        experts=experts,
        router=router,
        norms_and_biases=layers * (norms_per_layer + bias_per_layer) + h,
    )


def quantized_bits_per_weight(quantization: str, gguf_type: str = "Q4_K_M", dtype_bytes: int = 2) -> float:
    """Bits per weight of a quantized linear layer, scale and zero-point overhead included."""
    if quantization in ("fp8", "int8"):
        return 8.0  # per-channel or 128×128-block scales add < 0.05 %
    if quantization in ("awq", "gptq"):
        return INT4_GROUP_BITS
    if quantization == "bitsandbytes":
        return NF4_BITS
    if quantization == "gguf":
        return GGUF_BITS[gguf_type]
    return 8.0 * dtype_bytes


def weight_bytes(params: ParameterCount, settings: EngineSettings, gguf_type: str = "Q4_K_M") -> int:
    """Bytes of all weights of one replica: quantized linear layers plus what stays in the model dtype."""
    bits = quantized_bits_per_weight(settings.quantization, gguf_type, settings.dtype_bytes)
    if settings.quantization == "gguf":
        # GGUF files quantize the embedding and output matrices too; only norms stay in full precision.
        quantized = params.total - params.norms_and_biases
        return math.ceil(quantized * bits / 8) + params.norms_and_biases * settings.dtype_bytes
    return math.ceil(params.quantizable * bits / 8) + params.kept_in_dtype * settings.dtype_bytes


@dataclass(frozen=True)
class KvLayout:
    """KV-cache bytes per token per layer, for the whole model and for one tensor-parallel rank."""

    bytes_per_token_per_layer: int
    bytes_per_token_per_layer_per_gpu: int
    full_layers: int
    windowed_layers: int
    window: int | None
    formula: str

    @property
    def layers(self) -> int:
        return self.full_layers + self.windowed_layers

    @property
    def bytes_per_token(self) -> int:
        """The classic "KV per token": every layer, whole model."""
        return self.bytes_per_token_per_layer * self.layers

    @property
    def bytes_per_token_per_gpu(self) -> int:
        return self.bytes_per_token_per_layer_per_gpu * self.layers

    def sequence_bytes_per_gpu(self, tokens: int, block_size: int) -> int:
        """KV bytes one sequence of ``tokens`` pins on one GPU, in whole blocks; windowed layers cap."""
        full_blocks = math.ceil(tokens / block_size)
        total = self.full_layers * full_blocks
        if self.windowed_layers and self.window:
            windowed_blocks = min(full_blocks, math.ceil(self.window / block_size) + 1)
            total += self.windowed_layers * windowed_blocks
        return total * block_size * self.bytes_per_token_per_layer_per_gpu


def kv_layout(arch: ModelArchitecture, kv_dtype_bytes: int, tensor_parallel: int) -> KvLayout:
    windowed = arch.windowed_layers
    full = arch.num_hidden_layers - windowed
    if arch.attention == "mla":
        assert arch.kv_lora_rank and arch.qk_rope_head_dim
        latent = arch.kv_lora_rank + arch.qk_rope_head_dim
        per_layer = latent * kv_dtype_bytes
        # Every rank keeps the whole latent: MLA KV is not split by tensor parallelism.
        return KvLayout(
            per_layer,
            per_layer,
            full,
            windowed,
            arch.sliding_window,
            f"{arch.num_hidden_layers} layers × (kvLoraRank {arch.kv_lora_rank} + rope {arch.qk_rope_head_dim}) "
            f"× {kv_dtype_bytes} B (MLA latent, not split by TP)",
        )
    kv_heads, d = arch.kv_heads, arch.head_size
    per_layer = 2 * kv_heads * d * kv_dtype_bytes
    # vLLM replicates KV heads when TP exceeds them: each rank holds at least one.
    heads_per_rank = max(1, kv_heads // tensor_parallel)
    per_layer_per_gpu = 2 * heads_per_rank * d * kv_dtype_bytes
    return KvLayout(
        per_layer,
        per_layer_per_gpu,
        full,
        windowed,
        arch.sliding_window,
        f"2 × {arch.num_hidden_layers} layers × {kv_heads} KV heads × {d} head dim × {kv_dtype_bytes} B",
    )


def activation_peak_bytes(arch: ModelArchitecture, settings: EngineSettings, tensor_parallel: int) -> int:
    """The transient peak of vLLM's profile run: one step of maxNumBatchedTokens plus the sampler's logits.

    Calibrated on the start-up logs in tests/data/vllm_reported_memory.yaml: Llama-3.1-8B's peak grows
    by 110 KB per batched token on both V0 (0.6.4, 20k and 29k tokens) and V1 (0.19, 8192 tokens, after
    the logits), which is the MLP's gate/up and activation outputs plus three hidden-size buffers; the
    attention projections are freed before the MLP runs, so they do not add to the peak.
    """
    tokens = settings.max_num_batched_tokens
    act = settings.dtype_bytes
    if arch.is_moe:
        width = (arch.moe_intermediate_size or arch.intermediate_size) * (
            arch.num_experts_per_tok + arch.num_shared_experts
        )
        width = max(width, arch.intermediate_size if arch.first_k_dense_layers else 0)
    else:
        width = arch.intermediate_size
    mlp = tokens * (3 * width // tensor_parallel + 3 * arch.hidden_size) * act
    sequences = min(settings.max_num_seqs, tokens)
    if settings.line >= VersionLine(0, 8):
        # V1's sampler warm-up materialises fp32 logits and probabilities for every sequence slot.
        logits = sequences * arch.vocab_size * 4 * 2
    else:
        logits = sequences * arch.vocab_size * 4  # V0 samples the profile batch's last tokens once
    return mlp + logits


def cuda_graph_bytes(arch: ModelArchitecture, settings: EngineSettings, tensor_parallel: int) -> int:
    if settings.enforce_eager or not subtracts_cuda_graphs(settings.line):
        return 0
    largest_capture = min(2 * settings.max_num_seqs, CUDA_GRAPH_MAX_CAPTURE)
    buffers = largest_capture * arch.num_hidden_layers * arch.hidden_size * settings.dtype_bytes * 4
    return CUDA_GRAPH_BASE_BYTES + buffers // tensor_parallel


@dataclass(frozen=True)
class MemoryEstimate:
    """What one GPU of a replica holds at tensor-parallel size ``tensor_parallel``."""

    tensor_parallel: int
    gpu_total_bytes: int
    gpu_memory_utilization: float
    budget_bytes: int
    weights_bytes_total: int
    weights_bytes: int
    non_torch_bytes: int
    activation_bytes: int
    cuda_graph_bytes: int
    kv: KvLayout
    block_size: int

    @property
    def kv_cache_bytes(self) -> int:
        return (
            self.budget_bytes
            - self.weights_bytes
            - self.non_torch_bytes
            - self.activation_bytes
            - self.cuda_graph_bytes
        )

    @property
    def kv_blocks(self) -> int:
        if self.kv_cache_bytes <= 0:
            return 0
        return self.kv_cache_bytes // (self.block_size * self.kv.bytes_per_token_per_gpu)

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV cache holds, counted over every layer (what vLLM logs as the KV cache size)."""
        return self.kv_blocks * self.block_size

    def concurrency(self, tokens_per_sequence: int) -> float:
        """Sequences of ``tokens_per_sequence`` that fit at once (windowed layers make this exceed tokens/len)."""
        if self.kv_cache_bytes <= 0:
            return 0.0
        per_sequence = self.kv.sequence_bytes_per_gpu(tokens_per_sequence, self.block_size)
        usable = self.kv_blocks * self.block_size * self.kv.bytes_per_token_per_gpu
        return usable / per_sequence


def estimate_memory(
    arch: ModelArchitecture,
    settings: EngineSettings,
    gpu: GPU,
    tensor_parallel: int,
    gguf_type: str = "Q4_K_M",
) -> MemoryEstimate:
    params = count_parameters(arch)
    weights_total = weight_bytes(params, settings, gguf_type)
    budget = math.ceil(gpu.memory_bytes * settings.gpu_memory_utilization)
    return MemoryEstimate(
        tensor_parallel=tensor_parallel,
        gpu_total_bytes=gpu.memory_bytes,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        budget_bytes=budget,
        weights_bytes_total=weights_total,
        weights_bytes=math.ceil(weights_total / tensor_parallel),
        non_torch_bytes=NON_TORCH_BYTES + (NON_TORCH_TP_EXTRA_BYTES if tensor_parallel > 1 else 0),
        activation_bytes=activation_peak_bytes(arch, settings, tensor_parallel),
        cuda_graph_bytes=cuda_graph_bytes(arch, settings, tensor_parallel),
        kv=kv_layout(arch, settings.kv_dtype_bytes, tensor_parallel),
        block_size=settings.block_size,
    )

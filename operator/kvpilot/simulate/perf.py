"""A one-replica vLLM performance model: a roofline per engine step, calibrated on public figures.

One step processes the decode tokens of every running sequence plus prefill chunks up to the step
budget. It costs whichever is larger: streaming the weights and the KV cache of the batch through
HBM, or the step's FLOPs; plus overheads: a fixed one per step (launch, scheduler) and one per
sequence in the batch (sampling, detokenisation, bookkeeping).

The constants are fitted to the public figures in the developers' ``CALIBRATION.md`` (vLLM's own
latency CI and a concurrency sweep): H100 decode at batch 1 and 8, H200 at batch 8, A100-40GB at
batch 1, 1k-token prefill on A100; ``tests/unit/test_simulate.py`` holds each within 15 %. The H100
and H200 CI figures cannot both be matched by any bandwidth-proportional model (their ratio, 1.2, is
far below the bandwidth ratio, 1.43), so the fit splits the error between them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpilot.catalog.gpus import GPU
from kvpilot.catalog.models import ResolvedModel
from kvpilot.sizing.estimator import count_parameters
from kvpilot.sizing.planner import SizingPlan

ETA_BANDWIDTH = 0.76
ETA_COMPUTE = 0.67
STEP_OVERHEAD_S = 0.0003
SEQUENCE_OVERHEAD_S = 0.00015
TP_STEP_OVERHEAD_S = 0.0002  # all-reduces per step under tensor parallelism


@dataclass(frozen=True)
class ReplicaModel:
    weights_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    active_params: float  # parameters one token touches (MoE: top-k experts only)
    layers: int
    hidden: int
    tensor_parallel: int
    bandwidth: float  # bytes/s per GPU
    flops: float  # dense FLOP/s per GPU
    kv_capacity_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int

    def step_seconds(
        self, decode_tokens: int, prefill_tokens: int, context_tokens: int, attended_tokens: int = 0
    ) -> float:
        """One engine step. ``context_tokens``: KV the step reads; ``attended_tokens``: Σ over the step's
        tokens of how many tokens each attends to (the attention FLOPs)."""
        memory = (self.weights_bytes_per_gpu + context_tokens * self.kv_bytes_per_token_per_gpu) / (
            ETA_BANDWIDTH * self.bandwidth
        )
        tokens = decode_tokens + prefill_tokens
        attention = 4 * self.layers * self.hidden * attended_tokens
        compute = (2 * self.active_params * tokens + attention) / self.tensor_parallel / (ETA_COMPUTE * self.flops)
        sequences = decode_tokens + (1 if prefill_tokens else 0)
        overhead = STEP_OVERHEAD_S + SEQUENCE_OVERHEAD_S * sequences
        overhead += TP_STEP_OVERHEAD_S if self.tensor_parallel > 1 else 0.0
        return max(memory, compute) + overhead

    @classmethod
    def from_plan(cls, plan: SizingPlan, model: ResolvedModel, gpu: GPU) -> ReplicaModel:
        arch = model.architecture
        params = count_parameters(arch)
        active = float(params.total)
        if arch.is_moe:
            width = arch.moe_intermediate_size or arch.intermediate_size
            inactive = arch.num_experts - arch.num_experts_per_tok
            moe_layers = arch.num_hidden_layers - arch.first_k_dense_layers
            active -= moe_layers * inactive * 3 * arch.hidden_size * width
        return cls(
            weights_bytes_per_gpu=plan.weights_bytes_per_gpu,
            kv_bytes_per_token_per_gpu=plan.kv_bytes_per_token_per_gpu,
            active_params=active,
            layers=arch.num_hidden_layers,
            hidden=arch.hidden_size,
            tensor_parallel=plan.tensor_parallel_size,
            bandwidth=gpu.bandwidth_tbs * 1e12,
            flops=gpu.bf16_tflops * 1e12,
            kv_capacity_tokens=plan.kv_cache_tokens,
            max_num_seqs=plan.max_num_seqs,
            max_num_batched_tokens=plan.max_num_batched_tokens,
        )

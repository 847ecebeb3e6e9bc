"""The simulator: calibration of the replica model, and the fleet simulation's bookkeeping."""

from __future__ import annotations

import pytest

from kvpilot.api.v1alpha1 import LLMDeploymentSpec
from kvpilot.catalog.gpus import get_gpu
from kvpilot.catalog.models import lookup_model
from kvpilot.pipeline import render_all
from kvpilot.render.objects import RenderContext
from kvpilot.simulate.engine import SimConfig, simulate
from kvpilot.simulate.perf import ReplicaModel
from kvpilot.simulate.traces import Request

MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"


def replica(gpu: str, max_num_seqs: int = 8) -> ReplicaModel:
    spec = LLMDeploymentSpec.model_validate(
        {
            "model": {"id": MODEL},
            "resources": {"gpuType": gpu, "gpuCount": 1},
            "engine": {"maxNumSeqs": max_num_seqs, "maxModelLen": 2048},
        }
    )
    resolved = lookup_model(MODEL)
    assert resolved is not None
    plan = render_all(spec, RenderContext("a", "b", 1), resolved).plan
    return ReplicaModel.from_plan(plan, resolved, get_gpu(gpu))


# (GPU, decode batch, prefill tokens, published seconds, source) from CALIBRATION.md
PUBLISHED = [
    ("H100-80GB-SXM", 1, 0, 6.48e-3, "vLLM concurrency sweep, TPOT at concurrency 1"),
    ("H100-80GB-SXM", 8, 0, 7.8e-3, "vLLM performance CI latency test, batch 8, 32 in / 128 out"),
    ("H200", 8, 0, 6.5e-3, "vLLM performance CI latency test, batch 8"),
    ("A100-40GB", 1, 0, 13.3e-3, "public decode figure, batch 1"),
    ("A100-80GB", 0, 1024, 75e-3, "Vidur linear-op profile, 1k-token prefill"),
]


@pytest.mark.parametrize(("gpu", "batch", "prefill", "published", "source"), PUBLISHED)
def test_calibrated_within_15_percent(gpu: str, batch: int, prefill: int, published: float, source: str) -> None:
    model = replica(gpu)
    context = batch * 96 if batch else prefill
    attended = batch * 96 if batch else prefill * prefill // 2
    step = model.step_seconds(batch, prefill, context, attended)
    assert abs(step / published - 1) <= 0.15, f"{step * 1e3:.2f} ms vs {published * 1e3:.2f} ms ({source})"


def test_simulation_serves_every_request_and_counts_gpu_time() -> None:
    reqs = [Request(i * 0.5, 200, 50) for i in range(100)]
    result = simulate(reqs, replica("H100-80GB-SXM", 64), lambda obs: 2, "fixed-2", SimConfig(initial_replicas=2))
    assert all(r.done_at is not None for r in result.requests)
    assert all(r.first_token_at is not None and r.first_token_at >= r.req.arrival for r in result.requests)
    assert result.gpu_seconds == pytest.approx(2 * result.duration, rel=1e-6)
    assert max(result.waits()) < 0.5  # light load: nobody queues


def test_overload_queues_and_scale_up_pays_cold_start() -> None:
    burst = [Request(i * 0.1, 1500, 400) for i in range(3000)]  # 10 req/s for 5 minutes
    one = simulate(burst, replica("H100-80GB-SXM", 16), lambda obs: 1, "fixed-1", SimConfig())
    assert one.waits()[int(0.9 * len(burst))] > 10
    grow = simulate(burst, replica("H100-80GB-SXM", 16), lambda obs: 4, "grow", SimConfig(cold_start_seconds=60))
    assert grow.scale_events and grow.scale_events[0][1:] == (1, 4)
    assert grow.waits()[int(0.9 * len(burst))] < one.waits()[int(0.9 * len(burst))]

"""The simulator: calibration of the replica model, and the fleet simulation's bookkeeping."""

from __future__ import annotations

import dataclasses
import io
import json
import random
from pathlib import Path

import pytest

from kvpilot.api.v1alpha1 import LLMDeploymentSpec
from kvpilot.catalog.gpus import get_gpu
from kvpilot.catalog.models import lookup_model
from kvpilot.cli import main
from kvpilot.pipeline import render_all
from kvpilot.render.objects import RenderContext
from kvpilot.simulate.engine import Replica, SimConfig, simulate
from kvpilot.simulate.perf import ReplicaModel
from kvpilot.simulate.traces import Request, load_trace, synthesize

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


def test_decode_runs_match_stepping_one_token_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A small KV cache forces preemptions too; the fast path must not change a single timestamp.
    rng = random.Random(3)
    reqs = sorted(
        (Request(rng.uniform(0, 30), rng.randint(50, 3000), rng.randint(1, 1500)) for _ in range(300)),
        key=lambda r: r.arrival,
    )
    model = dataclasses.replace(replica("H100-80GB-SXM", 32), kv_capacity_tokens=12_000)

    def run() -> list[tuple[float | None, float | None, float | None, int]]:
        result = simulate(reqs, model, lambda obs: 2, "fixed-2", SimConfig(initial_replicas=2))
        return [(r.admitted_at, r.first_token_at, r.done_at, r.preemptions) for r in result.requests]

    fast = run()
    monkeypatch.setattr(Replica, "_decode_run", lambda self, t: self._step())
    slow = run()
    assert sum(p for *_, p in slow) > 0, "the case should exercise preemption"
    assert fast == slow


def _azure_csv(path: Path, rows: list[tuple[float, int, int]]) -> Path:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for t, i, o in rows:
        whole = int(t)
        lines.append(f"2023-11-16 18:{whole // 60:02d}:{whole % 60:02d}.{int((t % 1) * 1e7):07d},{i},{o}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_trace_formats(tmp_path: Path) -> None:
    azure = load_trace(_azure_csv(tmp_path / "a.csv", [(0.5, 100, 10), (1.25, 200, 20)]))
    assert [(r.arrival, r.input_tokens) for r in azure] == [(0.0, 100), (0.75, 200)]
    moon = tmp_path / "m.jsonl"
    moon.write_text(
        '{"timestamp": 1000, "input_length": 5, "output_length": 6, "hash_ids": []}\n'
        '{"timestamp": 3500, "input_length": 7, "output_length": 8, "hash_ids": []}\n'
    )
    assert [(r.arrival, r.output_tokens) for r in load_trace(moon)] == [(0.0, 6), (2.5, 8)]
    with pytest.raises(ValueError, match="not an Azure"):
        (tmp_path / "x.csv").write_text("a,b\n1,2\n")
        load_trace(tmp_path / "x.csv")


def test_synthesized_shape_follows_the_rates() -> None:
    shape = [(0.0, 1.0), (600.0, 3.0), (1200.0, 1.0)]
    reqs = synthesize(shape, [Request(0, 10, 5)], peak_rps=30.0, seconds_per_window=100)
    per_window = [sum(1 for r in reqs if w * 100 <= r.arrival < (w + 1) * 100) for w in range(3)]
    assert 2700 < per_window[1] < 3300 and 800 < per_window[0] < 1200  # 30 req/s at the peak, 10 outside


def test_simulate_cli_compares_policies(tmp_path: Path) -> None:
    rows = [(i * 0.05, 800, 60) for i in range(2400)]  # 20 req/s for two minutes
    trace = _azure_csv(tmp_path / "t.csv", rows)
    out, err = io.StringIO(), io.StringIO()
    code = main(["simulate", "--trace", str(trace), "--compare", "-o", "json", "--cold-start", "30"], out, err)
    assert code == 0, err.getvalue()
    table = {r["policy"]: r for r in json.loads(out.getvalue())}
    assert set(table) >= {
        "static-peak",
        "hpa-waiting",
        "keda-waiting",
        "knative-kpa",
        "aibrix-apa-kv0.5",
        "llm-d-saturation",
        "kvpilot",
        "oracle",
    }
    assert table["static-peak"]["vs_static_peak"] == 1.0 and table["oracle"]["vs_oracle"] == 1.0
    assert all(0 <= r["slo_attainment"] <= 1 and r["gpu_hours"] > 0 for r in table.values())

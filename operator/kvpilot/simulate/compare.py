"""Run every policy on one trace and report them side by side, with a hindsight oracle as the floor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvpilot.api.v1alpha1 import LLMDeploymentSpec
from kvpilot.autoscale.decision import Targets
from kvpilot.catalog.gpus import get_gpu
from kvpilot.catalog.models import resolve_model
from kvpilot.pipeline import render_all
from kvpilot.render.objects import RenderContext
from kvpilot.simulate.engine import Observation, Policy, SimConfig, SimResult, simulate
from kvpilot.simulate.perf import ReplicaModel
from kvpilot.simulate.policies import Apa, Hpa, Keda, Kpa, Kvpilot, Saturation, static
from kvpilot.simulate.traces import Request

DEFAULT_SPEC: dict[str, Any] = {
    "model": {"id": "meta-llama/Llama-3.1-8B-Instruct"},
    "resources": {"gpuType": "H100-80GB-SXM", "gpuCount": 1},
    "engine": {"maxModelLen": 16384, "maxNumSeqs": 128, "maxNumBatchedTokens": 2048},
    "sizing": {"tokensPerSequence": 3072},
    "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 32, "queueWaitP90Seconds": 0.5},
}


def replica_for(spec_data: dict[str, Any] | None = None) -> tuple[ReplicaModel, LLMDeploymentSpec, int]:
    spec = LLMDeploymentSpec.model_validate(spec_data or DEFAULT_SPEC)
    model = resolve_model(spec.model.id, spec.model.architecture, spec.model.architecture_from)
    plan = render_all(spec, RenderContext("sim", "sim", 1), model).plan
    return ReplicaModel.from_plan(plan, model, get_gpu(spec.resources.gpu_type)), spec, plan.gpus_per_replica


@dataclass(frozen=True)
class Row:
    policy: str
    gpu_hours: float
    slo_attainment: float
    p99_queue_wait: float
    p90_ttft: float
    scale_events: int
    flaps: int

    def as_dict(self, static_hours: float, oracle_hours: float) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "gpu_hours": round(self.gpu_hours, 3),
            "vs_static_peak": round(self.gpu_hours / static_hours, 3) if static_hours else None,
            "vs_oracle": round(self.gpu_hours / oracle_hours, 3) if oracle_hours else None,
            "slo_attainment": round(self.slo_attainment, 4),
            "p99_queue_wait_s": round(self.p99_queue_wait, 2),
            "p90_ttft_s": round(self.p90_ttft, 2),
            "scale_events": self.scale_events,
            "flaps": self.flaps,
        }


def flaps(events: list[tuple[float, int, int]], window: float) -> int:
    """Scale-downs followed by a scale-up within the stabilization window."""
    count = 0
    for i, (t, before, after) in enumerate(events):
        if after < before:
            count += any(t2 - t <= window and a2 > b2 for t2, b2, a2 in events[i + 1 :])
    return count


def summarize(result: SimResult, cfg: SimConfig, stabilization: float) -> Row:
    waits = result.waits()
    ttft = sorted(
        (r.first_token_at if r.first_token_at is not None else result.duration) - r.req.arrival for r in result.requests
    )
    within = sum(1 for w in waits if w <= cfg.slo_queue_seconds) / max(len(waits), 1)

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0

    return Row(
        result.policy,
        result.gpu_seconds / 3600,
        within,
        pct(waits, 0.99),
        pct(ttft, 0.90),
        len(result.scale_events),
        flaps(result.scale_events, stabilization),
    )


def oracle_schedule(requests: list[Request], model: ReplicaModel, cfg: SimConfig, window: float) -> list[int]:
    """Per window, the fewest warm replicas that keep 99 % of that window's requests within the SLO,
    found in hindsight by simulating each window on its own.

    The search starts from the previous window's answer, since load moves little between windows, and
    walks down while the SLO still holds, or up until it does.
    """
    if not requests:
        return [1]
    horizon = requests[-1].arrival
    chunks: list[list[Request]] = [[] for _ in range(int(horizon // window) + 1)]
    for r in requests:
        w = int(r.arrival // window)
        chunks[w].append(Request(r.arrival - w * window, r.input_tokens, r.output_tokens))

    def meets_slo(chunk: list[Request], n: int) -> bool:
        run = simulate(chunk, model, static(n), "probe", SimConfig(**{**cfg.__dict__, "initial_replicas": n}))
        waits = run.waits()
        return sum(1 for x in waits if x <= cfg.slo_queue_seconds) >= 0.99 * len(waits)

    counts: list[int] = []
    guess = 1
    for chunk in chunks:
        n = guess
        if not chunk:
            n = 1
        elif meets_slo(chunk, n):
            while n > 1 and meets_slo(chunk, n - 1):
                n -= 1
        else:
            while n < cfg.max_replicas and not meets_slo(chunk, n + 1):
                n += 1
            n = min(n + 1, cfg.max_replicas)
        counts.append(n)
        guess = n
    return counts


def oracle_policy(schedule: list[int], window: float, cold_start: float) -> Policy:
    """Asks for each window's replicas one cold start ahead, and gives them up when the window ends."""

    def policy(obs: Observation) -> int:
        now_w = int(obs.now // window)
        ahead_w = int((obs.now + cold_start) // window)
        wanted = [schedule[min(w, len(schedule) - 1)] for w in (now_w, ahead_w)]
        return max(wanted)

    return policy


def compare(
    requests: list[Request],
    spec_data: dict[str, Any] | None = None,
    cfg: SimConfig | None = None,
    oracle_window: float = 300.0,
    only: list[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, SimResult]]:
    model, spec, gpus = replica_for(spec_data)
    cfg = cfg or SimConfig(gpus_per_replica=gpus)
    auto = spec.autoscaling
    schedule = oracle_schedule(requests, model, cfg, oracle_window)
    peak = max(schedule)
    targets = Targets(
        min_replicas=max(1, auto.min_replicas),
        max_replicas=auto.max_replicas,
        queue_wait_p90_seconds=auto.queue_wait_p90_seconds,
        kv_cache_usage=auto.kv_cache_usage_target,
        slots_per_replica=model.max_num_seqs,
        stabilization_seconds=auto.scale_down_stabilization_seconds,
        max_scale_down_step=auto.max_scale_down_step,
        metrics_window_seconds=cfg.window_seconds,
    )
    policies: dict[str, Policy] = {
        "static-peak": static(peak),
        "hpa-waiting": Hpa(max_replicas=auto.max_replicas),
        "keda-waiting": Keda(max_replicas=auto.max_replicas),
        "knative-kpa": Kpa(target=model.max_num_seqs),
        "aibrix-apa-kv0.5": Apa(),
        "llm-d-saturation": Saturation(),
        "kvpilot": Kvpilot(targets),
        "oracle": oracle_policy(schedule, oracle_window, cfg.cold_start_seconds),
    }
    results: dict[str, SimResult] = {}
    rows: list[Row] = []
    for name, policy in policies.items():
        if only and name not in only and name not in ("static-peak", "oracle"):
            continue
        # Every policy starts warm, with what the first window needs: the trace begins mid-traffic.
        initial = peak if name == "static-peak" else schedule[0]
        result = simulate(requests, model, policy, name, SimConfig(**{**cfg.__dict__, "initial_replicas": initial}))
        results[name] = result
        rows.append(summarize(result, cfg, targets.stabilization_seconds))
    by_name = {r.policy: r for r in rows}
    static_hours = by_name["static-peak"].gpu_hours
    oracle_hours = by_name["oracle"].gpu_hours
    return [r.as_dict(static_hours, oracle_hours) for r in rows], results

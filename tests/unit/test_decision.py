"""The autoscaling decision: fast up, careful down, never blind."""

from __future__ import annotations

from dataclasses import replace

from kvpilot.autoscale.decision import Decision, ScaleState, Targets, decide
from kvpilot.metrics.signals import FleetSignals

T = Targets(
    min_replicas=1,
    max_replicas=10,
    queue_wait_p90_seconds=0.5,
    kv_cache_usage=0.8,
    slots_per_replica=32,
    stabilization_seconds=300,
    max_scale_down_step=1,
)


def sig(
    kv: float | None = 0.5,
    queue: float | None = 0.1,
    running: float = 10,
    waiting: float = 0,
    reporting: int = 3,
    finished: float | None = 1.0,
) -> FleetSignals:
    # Buckets like vLLM's: a p90 under 0.3 s is only known to be under 0.3 s.
    bound = None if queue is None else next(b for b in (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 1e9) if queue <= b)
    mean = None if queue is None else queue / 2
    return FleetSignals(reporting, kv, kv, waiting, running, queue, bound, mean, None, finished, 0.0, 100.0)


def run(
    decisions: list[tuple[FleetSignals | None, int, int]],
    targets: Targets = T,
    step: float = 15,
    state: ScaleState | None = None,
) -> list[Decision]:
    out, st = [], state or ScaleState()
    for i, (s, current, ready) in enumerate(decisions):
        d = decide(s, current, ready, targets, st, now=1000 + i * step)
        out.append(d)
        st = d.state
    return out


def test_queue_breach_adds_capacity_with_a_reason() -> None:
    d = decide(sig(queue=1.2), 3, 3, T, ScaleState(), 0)
    assert (d.action, d.replicas) == ("up", 4)  # no backlog to size from: one more replica
    assert d.reason == "queue wait p90 1.2 s > SLO 0.5 s on 3 ready replicas → 4"


def test_saturated_fleet_is_sized_from_its_measured_service_rate() -> None:
    # Two full replicas (64 slots) finish 10 req/s; the queue grew by 30 in 10 s, so 13 req/s arrive.
    first = decide(sig(queue=0.8, waiting=20, running=64, finished=10.0), 2, 2, T, ScaleState(), 0)
    second = decide(sig(queue=0.8, waiting=50, running=64, finished=10.0), 2, 2, T, first.state, 10)
    assert second.replicas == 4  # ceil(64 × 13/10 / (32 × 0.75))


def test_panic_on_a_large_breach_at_least_doubles_but_never_runs_away() -> None:
    d = decide(sig(queue=1.6, kv=0.5), 2, 2, T, ScaleState(), 0)
    assert d.replicas == 4 and "(panic)" in d.reason
    small = decide(sig(queue=0.6), 4, 4, T, ScaleState(), 0)
    assert small.replicas == 5 and "panic" not in small.reason
    before = decide(sig(queue=100.0, waiting=100, running=128, finished=1.0), 1, 1, T, ScaleState(), 0)
    huge = decide(sig(queue=100.0, waiting=5000, running=128, finished=1.0), 1, 1, T, before.state, 10)
    assert huge.replicas == 5  # 491 req/s estimated, but at most double plus four per decision


def test_kv_breach_alone_scales_up() -> None:
    d = decide(sig(kv=0.96, queue=0.1), 4, 4, T, ScaleState(), 0)
    assert (d.action, d.replicas) == ("up", 5) and "KV cache 96 % > target 80 %" in d.reason


def test_queue_growing_with_kv_healthy_is_seen_through_waiting() -> None:
    # Nobody has left the queue yet (no queue-time samples), KV looks fine, but requests pile up.
    d = decide(sig(kv=0.3, queue=None, running=96, waiting=40), 3, 3, T, ScaleState(), 0)
    assert d.action == "up" and "96 running > 75 % of 96 batch slots" in d.reason


def test_starting_replicas_are_credited() -> None:
    d = decide(sig(queue=0.9), 6, 3, T, ScaleState(), 0)  # wants ceil(3 × 1.8) = 6; 3 are starting
    assert (d.action, d.replicas) == ("hold", 6) and "3 starting will absorb" in d.reason


def test_pinned_at_max_says_so() -> None:
    d = decide(sig(queue=2.0), 10, 10, T, ScaleState(), 0)
    assert d.replicas == 10 and "pinned at maxReplicas 10" in d.reason


def test_missing_metrics_hold_and_never_scale_down() -> None:
    d = decide(None, 5, 5, T, ScaleState(), 0, unknown_reason="Prometheus unreachable")
    assert (d.action, d.replicas) == ("unknown", 5) and d.reason == "Prometheus unreachable: holding at 5"
    assert decide(sig(reporting=0), 5, 5, T, ScaleState(), 0).action == "unknown"
    no_kv = run([(sig(kv=None, running=0, queue=None, finished=0.0), 5, 5)] * 40)
    assert all(x.replicas == 5 for x in no_kv)


def test_scale_down_waits_for_the_window_then_steps_by_one() -> None:
    low = sig(kv=0.1, queue=0.01, running=2)
    ds = run([(low, 4, 4)] * 30)  # 15 s apart: the window (300 s) is covered after 20 decisions
    first_down = next(i for i, d in enumerate(ds) if d.action == "down")
    assert first_down * 15 >= 300
    assert ds[first_down].replicas == 3 and ds[first_down].reason.endswith("→ 3")
    assert all(d.replicas == 4 for d in ds[:first_down])


def test_a_recent_high_recommendation_blocks_scale_down() -> None:
    seq = [(sig(queue=1.0), 2, 2)] + [(sig(kv=0.1, queue=0.01, running=2), 4, 4)] * 19
    ds = run(seq)
    assert ds[0].action == "up"
    assert all(d.action != "down" for d in ds[1:])


def test_scale_down_needs_every_signal_clear() -> None:
    borderline = sig(kv=0.1, queue=0.6, running=2)
    borderline = replace(borderline, queue_wait_p90=0.45, queue_wait_p90_bound=0.5, queue_wait_mean=0.3)
    assert all(d.action != "down" for d in run([(borderline, 4, 4)] * 40))
    starting = sig(kv=0.1, queue=0.01, running=2)
    assert all(d.action != "down" for d in run([(starting, 4, 3)] * 40))


def test_down_target_keeps_headroom() -> None:
    busy = sig(kv=0.3, queue=0.05, running=40)  # kv at 37.5 % of target on 4 replicas
    ds = run([(busy, 4, 4)] * 60)
    assert min(d.replicas for d in ds) == 3  # 4 × 0.375 / 0.65 = 2.3 → 3, never 2


def test_min_and_max_are_enforced() -> None:
    t = replace(T, min_replicas=2, max_replicas=3)
    assert decide(sig(), 1, 1, t, ScaleState(), 0).replicas == 2
    assert decide(sig(queue=5), 3, 3, t, ScaleState(), 0).replicas == 3


def test_scale_to_zero_after_idle_only_when_enabled() -> None:
    idle = sig(kv=0.0, queue=None, running=0, finished=0.0)
    off = run([(idle, 1, 1)] * 60, targets=replace(T, min_replicas=0))
    assert min(d.replicas for d in off) == 1  # idle but scale-to-zero not enabled: keep one warm
    on_t = replace(T, min_replicas=0, scale_to_zero_after_seconds=600)
    on = run([(idle, 1, 1)] * 100, targets=on_t)
    zero_at = next(i for i, d in enumerate(on) if d.replicas == 0)
    assert zero_at * 15 >= 600
    assert decide(None, 0, 0, on_t, ScaleState(), 0).reason == "scaled to zero"


def test_deterministic() -> None:
    seq = [(sig(queue=q), 3, 3) for q in (0.2, 0.9, 0.3, 0.1, 0.05)]
    assert run(seq) == run(seq)


def test_coarse_buckets_do_not_block_scale_down() -> None:
    # Fast requests in vLLM's first bucket read as p90 ≈ 0.27 s; bound 0.3 s and the mean prove it small.
    fast = replace(sig(kv=0.1, running=2), queue_wait_p90=0.27, queue_wait_p90_bound=0.3, queue_wait_mean=0.01)
    assert any(d.action == "down" for d in run([(fast, 3, 3)] * 40))


def test_prefill_bound_fleet_learns_its_saturation_throughput_and_never_shrinks_below_it() -> None:
    # Short-output traffic saturates compute while KV and batch slots look idle (5 of 32 slots, KV 10 %).
    fresh = decide(sig(kv=0.1, queue=3.0, running=5, finished=24.0), 2, 2, T, ScaleState(), 0)
    assert fresh.state.capacity_per_replica is None  # 2 ready for less than a metrics window: not theirs yet
    settled = ScaleState(ready_since=(2, -60))
    breach = decide(sig(kv=0.1, queue=3.0, running=5, finished=24.0), 2, 2, T, settled, 0)
    assert breach.state.capacity_per_replica == 12.0  # 24 req/s on 2 saturated replicas
    # Later, at 4 replicas with the queue clear, the same 24 req/s need ceil(24 / (12 × 0.8)) = 3:
    # KV and slots alone would have said 1.
    calm = replace(breach.state, last_change=None)
    decisions = run([(sig(kv=0.1, queue=0.1, running=5, finished=24.0), 4, 4)] * 60, state=calm)
    assert {d.replicas for d in decisions} == {3, 4}  # `run` keeps offering 4: it steps to 3, never lower


def test_learned_throughput_sizes_a_growing_backlog_in_one_step() -> None:
    state = ScaleState(capacity_per_replica=10.0, last_waiting=(0, 0))
    # 2 replicas finish 20 req/s and the queue grows 10/s: 30 req/s arrive, which needs 3 at 10 each.
    d = decide(sig(kv=0.1, queue=1.5, running=5, waiting=100, finished=20.0), 2, 2, T, state, 10)
    # The queue is at 3× the SLO, but with the throughput known there is no panic doubling: 30 req/s at
    # 10 each is 3 replicas.
    assert d.replicas == 3 and "panic" not in d.reason
    d = decide(sig(kv=0.1, queue=1.0, running=5, waiting=300, finished=20.0), 2, 2, T, state, 10)
    assert d.replicas == 5  # ceil((20 + 30) / 10): the backlog grows 30/s


def test_any_breach_on_a_settled_fleet_teaches_its_throughput() -> None:
    # Long prompts: one replica hit the KV target at 3.6 req/s. Later two replicas carry 4.2 req/s with
    # KV at 7 % and a short queue; KV and slots alone would hand the load back to one replica, which
    # already showed it cannot carry it (the Mooncake trace's flap).
    settled = ScaleState(ready_since=(1, -60))
    up = decide(sig(kv=0.85, queue=0.2, running=20, finished=3.6, reporting=1), 1, 1, T, settled, 0)
    assert up.action == "up" and up.state.capacity_per_replica == 3.6
    calm = replace(up.state, last_change=None, ready_since=(2, -60))
    decisions = run([(sig(kv=0.07, queue=0.27, running=9, finished=4.2, reporting=2), 2, 2)] * 40, state=calm)
    assert all(d.replicas == 2 for d in decisions), decisions[-1].reason
    # At a rate one replica carries with headroom (under 80 % of 3.6 req/s) it does step down.
    decisions = run([(sig(kv=0.07, queue=0.1, running=5, finished=2.5, reporting=2), 2, 2)] * 40, state=calm)
    assert any(d.action == "down" and d.replicas == 1 for d in decisions)


def test_a_draining_backlog_holds_instead_of_piling_on_replicas() -> None:
    # A burst left 4,000 requests on the replica they were routed to; new replicas only take new arrivals.
    # The p90 remembers the backlog for a whole window, but the waiting count falls: the fleet already
    # completes more than arrives, and doubling on that p90 (as before) ran 3 replicas up to 16.
    state = ScaleState(capacity_per_replica=15.0, last_waiting=(0, 4207), ready_since=(3, -600))
    d = decide(sig(kv=0.1, queue=110.0, running=20, waiting=3963, finished=40.0), 3, 3, T, state, 15)
    assert d.action == "hold" and d.replicas == 3
    assert "drains (4207 → 3963 waiting)" in d.reason
    assert d.state.capacity_per_replica == 15.0  # a draining queue is not saturation: nothing learned
    # The same p90 with the queue still growing is saturation: up, sized by arrivals ÷ throughput.
    d = decide(sig(kv=0.1, queue=110.0, running=20, waiting=4500, finished=40.0), 3, 3, T, state, 15)
    assert d.action == "up" and d.replicas == 5 and "panic" not in d.reason  # (40 + 19.5 growing) / 14.2 learned


def test_panic_doubles_only_while_the_throughput_is_unknown() -> None:
    unknown = decide(sig(kv=0.1, queue=3.0, running=5, finished=10.0), 2, 2, T, ScaleState(), 0)
    assert unknown.replicas == 4 and "(panic)" in unknown.reason
    known = decide(sig(kv=0.1, queue=3.0, running=5, finished=10.0), 2, 2, T, ScaleState(capacity_per_replica=4.0), 0)
    assert known.replicas == 3 and "panic" not in known.reason  # ceil(10 / 4)

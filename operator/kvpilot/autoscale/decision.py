"""The autoscaling decision: pure, deterministic, and explained in one sentence.

Up fast: sized by the arrivals against what a replica was seen to carry when the queue-wait SLO, the
KV-cache target or batch-slot pressure is breached, with a panic path for large breaches while that is
unknown, crediting replicas that are still starting, and holding while a backlog drains.
Down slowly: only when every signal is known and well under target, only after the stabilization
window's recommendations all agree (HPA's rule), and at most a bounded step. Missing metrics hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

from kvpilot.metrics.signals import FleetSignals

Action = Literal["up", "down", "hold", "unknown"]

PANIC_QUEUE_RATIO = 3.0  # queue wait three times the SLO: jump, don't crawl
PANIC_FACTOR = 2.0
# A replica's saturation throughput is learned from breaches (below). Up sizes the fleet to carry the
# arrivals at that throughput; a replica is only removed when the rest would stay under 80 % of it, so
# an up is never undone by a down at the same load.
RATE_DOWN_HEADROOM = 0.80
CAPACITY_SMOOTHING = 0.5  # weight of the newest saturated-throughput sample
MAX_GROWTH = 2.0  # one decision at most doubles the fleet (plus 4): estimates are noisy under overload
# Up before saturation: a new replica takes minutes to start, so act while a quarter of the batch slots
# (or of the measured service rate) is still free to absorb the growth meanwhile.
SLOT_TARGET = 0.75
DOWN_HEADROOM = 0.65  # after a scale-down every signal must sit under 65 % of its target
QUEUE_DOWN_RATIO = 0.5  # mean queue wait must be under half the SLO to remove capacity


@dataclass(frozen=True)
class Targets:
    min_replicas: int
    max_replicas: int
    queue_wait_p90_seconds: float
    kv_cache_usage: float
    slots_per_replica: int  # vLLM's max_num_seqs
    stabilization_seconds: float = 600
    max_scale_down_step: int = 1
    scale_to_zero_after_seconds: float | None = None
    metrics_window_seconds: float = 60  # rates and quantiles are taken over this window


@dataclass(frozen=True)
class ScaleState:
    """What one decision hands the next: recent recommendations and when load was last seen."""

    recommendations: tuple[tuple[float, int], ...] = ()
    idle_since: float | None = None
    last_change: float | None = None
    last_waiting: tuple[float, float] | None = None  # (time, waiting) at the previous decision
    # Requests/s one replica completes when a target breaches: its saturation throughput for
    # the traffic it actually serves. Prefill-bound traffic saturates compute long before the batch
    # slots or the KV cache fill, so only this tells how few replicas can carry a given request rate.
    capacity_per_replica: float | None = None
    ready_since: tuple[int, float] | None = None  # (ready replicas, since when)


@dataclass(frozen=True)
class Decision:
    replicas: int
    action: Action
    reason: str
    state: ScaleState = field(default_factory=ScaleState)


def _clamp(n: int, t: Targets) -> int:
    return max(t.min_replicas, min(t.max_replicas, n))


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x < 10 else f"{x:.0f}"


def decide(
    signals: FleetSignals | None,
    current: int,
    ready: int,
    targets: Targets,
    state: ScaleState,
    now: float,
    unknown_reason: str = "no metrics",
) -> Decision:
    starting = max(0, current - ready)
    window_start = now - targets.stabilization_seconds
    history = tuple((t, r) for t, r in state.recommendations if t >= window_start - 1e-9)

    if current == 0:
        # At zero there is no vLLM to ask; coming back needs `kubectl scale` or minReplicas > 0.
        n = _clamp(0, targets)
        return Decision(
            n,
            "hold" if n == 0 else "up",
            "scaled to zero" if n == 0 else f"minReplicas → {n}",
            replace(state, recommendations=history),
        )
    if signals is None or signals.replicas_reporting == 0:
        n = _clamp(current, targets)
        why = f"{unknown_reason}: holding at {n}" + (f" ({starting} starting)" if starting else "")
        return Decision(n, "unknown", why, replace(state, recommendations=history))

    kv = signals.kv_usage_mean
    kv_ratio = kv / targets.kv_cache_usage if kv is not None else None
    slots = targets.slots_per_replica * max(ready, 1)
    # Running sequences, not waiting ones: a backlog stays on the pod it was routed to, so new replicas
    # only help with what keeps arriving. Its growth tells how fast that is (below).
    slot_ratio = signals.running / (slots * SLOT_TARGET)
    queue = signals.queue_wait_p90
    queue_ratio = queue / targets.queue_wait_p90_seconds if queue is not None else None
    base = max(ready, 1)

    breaches: list[tuple[float, str]] = []
    if queue_ratio is not None and queue_ratio > 1:
        breaches.append((queue_ratio, f"queue wait p90 {_fmt(queue)} s > SLO {_fmt(targets.queue_wait_p90_seconds)} s"))  # type: ignore[arg-type]
    if kv_ratio is not None and kv_ratio > 1:
        breaches.append((kv_ratio, f"KV cache {kv * 100:.0f} % > target {targets.kv_cache_usage * 100:.0f} %"))  # type: ignore[operator]
    if slot_ratio > 1:
        what = f"{signals.running:.0f} running > {SLOT_TARGET * 100:.0f} % of {slots} batch slots"
        breaches.append((slot_ratio, what))

    observed = (now, signals.waiting)
    service = signals.finished_per_second
    capacity = state.capacity_per_replica
    ready_since = state.ready_since if state.ready_since and state.ready_since[0] == ready else (ready, now)
    settled = now - ready_since[1] >= targets.metrics_window_seconds
    # How fast the queue grows (negative: drains), from the waiting count at the previous decision.
    queue_trend = 0.0
    waiting_before = signals.waiting
    if state.last_waiting is not None and now > state.last_waiting[0]:
        waiting_before = state.last_waiting[1]
        queue_trend = (signals.waiting - waiting_before) / (now - state.last_waiting[0])
    # A backlog stays on the pod it was routed to, and the p90 remembers it for a whole window: while the
    # waiting count falls the fleet already completes more than arrives, and more replicas would only
    # serve what keeps arriving, which the fleet carries.
    queue_breached = queue_ratio is not None and queue_ratio > 1
    draining = queue_breached and queue_trend < 0
    if breaches and starting == 0 and settled and service and ready and not draining:
        # Every replica is serving, has been for the whole metrics window (so the completions and the
        # lagging p90 are theirs, not a smaller fleet's), and a target is breached with the queue not
        # shrinking: this is as much as a replica carries for this traffic. Any target counts: a KV
        # breach taught only by the KV gauge would be forgotten once a bigger fleet brings the gauge
        # down, and the fleet handed back.
        sample = service / ready
        capacity = sample if capacity is None else CAPACITY_SMOOTHING * sample + (1 - CAPACITY_SMOOTHING) * capacity
    if breaches:
        _, what = max(breaches)
        wanted = ready + 1 if queue_breached and not draining else 0
        if kv_ratio is not None and kv_ratio > 1:
            wanted = max(wanted, math.ceil(base * kv_ratio))
        growth = max(0.0, queue_trend)
        # Little's law: at this batch occupancy replicas finish `service` req/s; arrivals are that plus the
        # queue's growth, so the fleet needs occupancy × arrivals / completions, at the slot target.
        rising = (service + growth) / service if service else 1.0
        if signals.running > 0:
            wanted = max(wanted, math.ceil(signals.running * rising / (targets.slots_per_replica * SLOT_TARGET)))
        if capacity and service:
            wanted = max(wanted, math.ceil((service + growth) / capacity))
        # Panic only sizes a fleet whose throughput is still unknown; once learned, arrivals ÷ throughput
        # is the better answer, and doubling on a draining backlog's p90 only overshoots.
        panic = queue_ratio is not None and queue_ratio >= PANIC_QUEUE_RATIO and capacity is None and not draining
        if panic:
            wanted = max(wanted, math.ceil(base * PANIC_FACTOR))
        wanted = min(wanted, max(math.ceil(current * MAX_GROWTH), current + 4))
        wanted = _clamp(max(wanted, 1), targets)
        record = ((now, wanted),)
        if wanted <= current:
            if current >= targets.max_replicas:
                why = f"{what} on {ready} ready replicas; pinned at maxReplicas {targets.max_replicas}"
            elif draining and not starting:
                why = (
                    f"{what} on {ready} ready replicas, but the queue drains "
                    f"({waiting_before:.0f} → {signals.waiting:.0f} waiting); holding"
                )
            else:
                why = f"{what} on {ready} ready replicas; the {starting} starting will absorb it"
            return Decision(
                current,
                "hold",
                why,
                ScaleState(history + record, None, state.last_change, observed, capacity, ready_since),
            )
        why = f"{what} on {ready} ready replicas → {wanted}" + (" (panic)" if panic else "")
        return Decision(wanted, "up", why, ScaleState(history + record, None, now, observed, capacity, ready_since))

    # No breach. How many replicas would carry this load with headroom?
    idle = signals.running == 0 and signals.waiting == 0 and not signals.finished_per_second
    idle_since = (state.idle_since if state.idle_since is not None else now) if idle else None
    util = max(x for x in (kv_ratio or 0.0, slot_ratio) if x is not None)
    needed = _clamp(max(1, math.ceil(base * util / DOWN_HEADROOM)), targets)
    if capacity and service:
        needed = max(needed, _clamp(math.ceil(service / (capacity * RATE_DOWN_HEADROOM)), targets))
    if (
        targets.scale_to_zero_after_seconds is not None
        and targets.min_replicas == 0
        and idle_since is not None
        and now - idle_since >= targets.scale_to_zero_after_seconds
    ):
        needed = 0
    history = (*history, (now, needed))
    # The p90's bucket edge must be inside the SLO and the mean well under it: histogram buckets are
    # coarse (vLLM's start at 0.3 s), so an interpolated p90 cannot prove a small queue on its own.
    queue_clear = queue is None or (
        signals.queue_wait_p90_bound is not None
        and signals.queue_wait_p90_bound <= targets.queue_wait_p90_seconds
        and (signals.queue_wait_mean or 0.0) <= QUEUE_DOWN_RATIO * targets.queue_wait_p90_seconds
    )
    safe_to_shrink = starting == 0 and kv_ratio is not None and queue_clear and signals.waiting == 0
    # A full window of low recommendations, all made since the last change: one step, then watch again.
    since_change = state.last_change is None or state.last_change <= window_start + 1e-9
    window_covered = since_change and any(t <= window_start + 1e-9 for t, _ in state.recommendations)
    next_state = ScaleState(history, idle_since, state.last_change, observed, capacity, ready_since)
    if needed >= current or not safe_to_shrink or not window_covered:
        n = _clamp(current, targets)
        if n != current:
            return Decision(
                n,
                "up" if n > current else "down",
                f"kept within [{targets.min_replicas}, {targets.max_replicas}] → {n}",
                replace(next_state, last_change=now),
            )
        why = "within targets" if needed >= current else "load is low; waiting out the stabilization window"
        if needed < current and not safe_to_shrink:
            why = "load is low but not every signal is clear; holding"
        return Decision(current, "hold", f"{why} at {current}", next_state)
    floor = max(r for _, r in history)  # the highest recommendation in the window wins (HPA's rule)
    target = max(floor, current - targets.max_scale_down_step, targets.min_replicas)
    if floor == 0 and needed == 0:
        target = 0
    if target >= current:
        return Decision(
            current,
            "hold",
            f"a recommendation in the last {targets.stabilization_seconds:.0f} s "
            f"still needs {floor}; holding at {current}",
            next_state,
        )
    kv_text = f"KV cache {kv * 100:.0f} %" if kv is not None else "KV cache unknown"
    queue_text = f"queue wait p90 {_fmt(queue)} s" if queue is not None else "no queueing"
    why = (
        f"{kv_text}, {queue_text}, {signals.running:.0f} running on {ready} replicas for "
        f"{targets.stabilization_seconds:.0f} s → {target}"
    )
    return Decision(target, "down", why, ScaleState(history, idle_since, now, observed, capacity, ready_since))

"""From scrapes to the signals the autoscaler decides on: per replica, then for the fleet."""

from __future__ import annotations

from dataclasses import dataclass

from kvpilot.metrics.names import MetricNames
from kvpilot.metrics.parse import Histogram, MetricsError, Scrape


@dataclass(frozen=True)
class ReplicaWindow:
    """One replica over one window: gauges at its end, histogram and counter deltas across it."""

    kv_usage: float | None
    waiting: float
    running: float
    queue_time: Histogram | None
    ttft: Histogram | None
    finished: float
    preemptions: float
    generation_tokens: float
    seconds: float


def _delta(cur: Scrape, prev: Scrape | None, name: str) -> float:
    now = cur.counters.get(name, 0.0)
    before = prev.counters.get(name, 0.0) if prev else 0.0
    return now - before if now >= before else now  # a reset (restart) counts from zero


def _hist_delta(cur: Scrape, prev: Scrape | None, name: str) -> Histogram | None:
    hist = cur.histograms.get(name)
    if hist is None:
        return None
    earlier = prev.histograms.get(name) if prev else None
    return hist.minus(earlier) if earlier is not None else None


def replica_window(cur: Scrape, prev: Scrape | None, names: MetricNames) -> ReplicaWindow:
    """Without a previous scrape only gauges are known: rates and quantiles need two points."""
    if names.running not in cur.gauges or cur.first(names.kv_cache_usage) is None:
        raise MetricsError(
            f"no {names.running} or {names.kv_cache_usage[0]} on the page: not vLLM, or another vLLM version"
        )
    return ReplicaWindow(
        kv_usage=cur.first(names.kv_cache_usage),
        waiting=cur.gauges.get(names.waiting, 0.0),
        running=cur.gauges.get(names.running, 0.0),
        queue_time=_hist_delta(cur, prev, names.queue_time),
        ttft=_hist_delta(cur, prev, names.ttft),
        finished=_delta(cur, prev, names.finished) if prev else 0.0,
        preemptions=_delta(cur, prev, names.preemptions) if prev else 0.0,
        generation_tokens=_delta(cur, prev, names.generation_tokens) if prev else 0.0,
        seconds=cur.at - prev.at if prev else 0.0,
    )


@dataclass(frozen=True)
class FleetSignals:
    """What the fleet of ready replicas looks like; None fields are unknown, not zero."""

    replicas_reporting: int
    kv_usage_mean: float | None
    kv_usage_max: float | None
    waiting: float
    running: float
    queue_wait_p90: float | None  # None: nobody left the queue in the window
    queue_wait_p90_bound: float | None  # upper edge of the p90's bucket
    queue_wait_mean: float | None
    ttft_p90: float | None
    finished_per_second: float | None
    preemptions_per_second: float | None
    generation_tokens_per_second: float | None


def _merge(hists: list[Histogram | None]) -> Histogram | None:
    present = [h for h in hists if h is not None]
    if not present:
        return None
    merged = present[0]
    for h in present[1:]:
        if len(h.buckets) == len(merged.buckets):
            merged = merged.merged(h)
    return merged


def fleet_signals(windows: list[ReplicaWindow]) -> FleetSignals:
    kv = [w.kv_usage for w in windows if w.kv_usage is not None]
    timed = [w for w in windows if w.seconds > 0]
    queue = _merge([w.queue_time for w in windows])
    ttft = _merge([w.ttft for w in windows])

    def rate(values: list[float]) -> float | None:
        return sum(values) if timed else None

    return FleetSignals(
        replicas_reporting=len(windows),
        kv_usage_mean=sum(kv) / len(kv) if kv else None,
        kv_usage_max=max(kv) if kv else None,
        waiting=sum(w.waiting for w in windows),
        running=sum(w.running for w in windows),
        queue_wait_p90=queue.quantile(0.9) if queue else None,
        queue_wait_p90_bound=queue.quantile_bound(0.9) if queue else None,
        queue_wait_mean=queue.mean if queue else None,
        ttft_p90=ttft.quantile(0.9) if ttft else None,
        finished_per_second=rate([w.finished / w.seconds for w in timed]),
        preemptions_per_second=rate([w.preemptions / w.seconds for w in timed]),
        generation_tokens_per_second=rate([w.generation_tokens / w.seconds for w in timed]),
    )

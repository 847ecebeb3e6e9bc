"""Parse a vLLM /metrics page (Prometheus text format) with prometheus_client's reference parser.

Series are summed over their label sets (one per engine / data-parallel rank, per finish reason), which
is what a per-pod signal needs; ``_created`` timestamps are dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from kvpilot.errors import KvpilotError


class MetricsError(KvpilotError):
    """A metrics page or query could not be read; the autoscaler treats the replica as unknown."""


@dataclass(frozen=True)
class Histogram:
    buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), sorted, +Inf last
    count: float
    sum: float

    def minus(self, earlier: Histogram) -> Histogram:
        """Observations between two scrapes (a counter reset, e.g. a restart, counts from zero)."""
        if self.count < earlier.count or len(self.buckets) != len(earlier.buckets):
            return self
        return Histogram(
            tuple((le, c - e) for (le, c), (_, e) in zip(self.buckets, earlier.buckets, strict=True)),
            self.count - earlier.count,
            self.sum - earlier.sum,
        )

    def merged(self, other: Histogram) -> Histogram:
        if len(self.buckets) != len(other.buckets):
            raise MetricsError("cannot merge histograms with different buckets")
        return Histogram(
            tuple((le, a + b) for (le, a), (_, b) in zip(self.buckets, other.buckets, strict=True)),
            self.count + other.count,
            self.sum + other.sum,
        )

    def quantile_bound(self, q: float) -> float | None:
        """The upper edge of the bucket holding quantile ``q``: what the buckets can promise it is under.

        vLLM's queue-time buckets start at 0.3 s, so an interpolated p90 of fast requests reads about
        0.27 s whatever they really waited; the bound (0.3 s) and the mean are what can prove it small.
        """
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.buckets[-1][1]
        return next((upper for upper, cumulative in self.buckets if cumulative >= rank), math.inf)

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """PromQL's histogram_quantile: linear interpolation inside the bucket; None without observations."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.buckets[-1][1]
        lower_bound, lower_count = 0.0, 0.0
        for upper, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(upper):
                    return lower_bound  # beyond the last finite bucket: its bound is all we know
                if cumulative == lower_count:
                    return upper
                return lower_bound + (upper - lower_bound) * (rank - lower_count) / (cumulative - lower_count)
            lower_bound, lower_count = upper, cumulative
        return lower_bound


@dataclass(frozen=True)
class Scrape:
    at: float  # seconds (monotonic or epoch; only differences matter)
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)

    def first(self, names: tuple[str, ...]) -> float | None:
        return next((self.gauges[n] for n in names if n in self.gauges), None)


def parse_metrics(text: str, at: float) -> Scrape:
    gauges: dict[str, float] = {}
    counters: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    counts: dict[str, float] = {}
    sums: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name, value = sample.name, float(sample.value)
                if math.isnan(value) or name.endswith("_created"):
                    continue
                if family.type == "histogram":
                    if name.endswith("_bucket"):
                        le = float(sample.labels["le"])
                        by_le = buckets.setdefault(family.name, {})
                        by_le[le] = by_le.get(le, 0.0) + value
                    elif name.endswith("_count"):
                        counts[family.name] = counts.get(family.name, 0.0) + value
                    elif name.endswith("_sum"):
                        sums[family.name] = sums.get(family.name, 0.0) + value
                elif family.type == "counter":
                    counters[name] = counters.get(name, 0.0) + value
                elif family.type in ("gauge", "untyped", "unknown"):
                    gauges[name] = gauges.get(name, 0.0) + value
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise MetricsError(f"not a Prometheus metrics page: {exc}") from exc
    histograms = {
        name: Histogram(tuple(sorted(by_le.items())), counts.get(name, 0.0), sums.get(name, 0.0))
        for name, by_le in buckets.items()
    }
    if not gauges and not counters and not histograms:
        raise MetricsError("the metrics page holds no samples")
    return Scrape(at=at, gauges=gauges, counters=counters, histograms=histograms)

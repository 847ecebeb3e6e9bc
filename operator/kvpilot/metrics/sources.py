"""Where fleet signals come from: each ready pod's /metrics (direct scrape) or Prometheus.

Both hand back ``FleetSignals`` or raise ``MetricsUnavailable`` with a CamelCase reason for the
``MetricsAvailable`` condition. Timeouts are short and bounded: one hanging pod costs one timeout,
in parallel with the others, and never blocks the decision.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from kvpilot.errors import KvpilotError
from kvpilot.metrics.names import MetricNames
from kvpilot.metrics.parse import Histogram, MetricsError, Scrape, parse_metrics
from kvpilot.metrics.signals import FleetSignals, ReplicaWindow, fleet_signals, replica_window

SCRAPE_TIMEOUT = 2.0
PROMETHEUS_TIMEOUT = 5.0


class MetricsUnavailable(KvpilotError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class PodTarget:
    name: str
    ip: str
    port: int


class ScrapeSource:
    """Scrapes every ready pod; rates and quantiles come from the previous scrape of the same pod."""

    def __init__(self, client: httpx.Client | None = None, timeout: float = SCRAPE_TIMEOUT) -> None:
        self.client = client or httpx.Client(timeout=httpx.Timeout(timeout))
        self.previous: dict[str, Scrape] = {}
        self.pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="kvpilot-scrape")

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        self.client.close()

    def __enter__(self) -> ScrapeSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _scrape(self, target: PodTarget) -> Scrape:
        try:
            response = self.client.get(f"http://{target.ip}:{target.port}/metrics")
        except httpx.HTTPError as exc:
            raise MetricsError(f"{target.name}: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise MetricsError(f"{target.name}: HTTP {response.status_code}")
        return parse_metrics(response.text, time.monotonic())

    def collect(self, key: str, targets: list[PodTarget], names: MetricNames, window: float) -> FleetSignals:
        if not targets:
            raise MetricsUnavailable("NoReadyReplicas", "no ready replica to read metrics from")
        results = list(self.pool.map(self._safe_scrape, targets))
        windows: list[ReplicaWindow] = []
        failures: list[str] = []
        for target, result in zip(targets, results, strict=True):
            if isinstance(result, MetricsError):
                failures.append(str(result))
                continue
            slot = f"{key}/{target.name}"
            prev = self.previous.get(slot)
            try:
                windows.append(replica_window(result, prev, names))
            except MetricsError as exc:
                failures.append(f"{target.name}: {exc}")
                continue
            # Keep the window's start until it is `window` old, so deltas span the configured window.
            if prev is None or result.at - prev.at >= window:
                self.previous[slot] = result
        live = {f"{key}/{t.name}" for t in targets}
        for slot in [s for s in self.previous if s.startswith(f"{key}/") and s not in live]:
            del self.previous[slot]
        if not windows:
            raise MetricsUnavailable("ScrapeFailed", "no pod answered with vLLM metrics: " + "; ".join(failures))
        return fleet_signals(windows)

    def _safe_scrape(self, target: PodTarget) -> Scrape | MetricsError:
        try:
            return self._scrape(target)
        except MetricsError as exc:
            return exc


class PrometheusSource:
    """PromQL over the pods of one Deployment: `{namespace="ns", pod=~"<deployment>-<hash>-<id>"}`."""

    def __init__(self, url: str, connect: Any = None) -> None:
        from prometheus_api_client import PrometheusConnect

        self.url = url
        self.prom = connect or PrometheusConnect(url=url, disable_ssl=True, timeout=PROMETHEUS_TIMEOUT)

    def _scalar(self, query: str) -> float | None:
        try:
            result = self.prom.custom_query(query)
        except Exception as exc:  # requests, JSON and API errors all mean the same here
            raise MetricsUnavailable("PrometheusUnreachable", f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(result, list):
            raise MetricsUnavailable("PrometheusGarbled", f"{self.url} answered {type(result).__name__}")
        if not result:
            return None
        try:
            value = float(result[0]["value"][1])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise MetricsUnavailable("PrometheusGarbled", f"{self.url}: unexpected result {result!r:.200}") from exc
        return None if value != value else value  # NaN: no samples in the window

    def _histogram(self, buckets_query: str, sum_query: str | None) -> Histogram | None:
        """Bucket rates from PromQL, judged by the same quantile code as a direct scrape."""
        try:
            rows = self.prom.custom_query(buckets_query)
            pairs = sorted((float(r["metric"]["le"]), float(r["value"][1])) for r in rows)
        except MetricsUnavailable:
            raise
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise MetricsUnavailable("PrometheusGarbled", f"{self.url}: unexpected buckets") from exc
        except Exception as exc:
            raise MetricsUnavailable("PrometheusUnreachable", f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if not pairs or pairs[-1][1] != pairs[-1][1]:
            return None
        total = pairs[-1][1]
        total_sum = (self._scalar(sum_query) or 0.0) if sum_query else 0.0
        return Histogram(tuple(pairs), total, total_sum)

    def collect(self, namespace: str, deployment: str, names: MetricNames, window: float) -> FleetSignals:
        sel = f'namespace="{namespace}",pod=~"{deployment}-[a-z0-9]+-[a-z0-9]+"'
        w = f"{int(window)}s"
        reporting = self._scalar(f"count({names.running}{{{sel}}})")
        if not reporting:
            raise MetricsUnavailable("NoSamples", f"Prometheus has no {names.running} for {namespace}/{deployment}")
        kv_name = names.kv_cache_usage[0]

        queue = self._histogram(
            f"sum by (le) (rate({names.queue_time}_bucket{{{sel}}}[{w}]))",
            f"sum(rate({names.queue_time}_sum{{{sel}}}[{w}]))",
        )
        ttft = self._histogram(f"sum by (le) (rate({names.ttft}_bucket{{{sel}}}[{w}]))", None)
        return FleetSignals(
            replicas_reporting=int(reporting),
            kv_usage_mean=self._scalar(f"avg({kv_name}{{{sel}}})"),
            kv_usage_max=self._scalar(f"max({kv_name}{{{sel}}})"),
            waiting=self._scalar(f"sum({names.waiting}{{{sel}}})") or 0.0,
            running=self._scalar(f"sum({names.running}{{{sel}}})") or 0.0,
            queue_wait_p90=queue.quantile(0.9) if queue else None,
            queue_wait_p90_bound=queue.quantile_bound(0.9) if queue else None,
            queue_wait_mean=queue.mean if queue else None,
            ttft_p90=ttft.quantile(0.9) if ttft else None,
            finished_per_second=self._scalar(f"sum(rate({names.finished}{{{sel}}}[{w}]))"),
            preemptions_per_second=self._scalar(f"sum(rate({names.preemptions}{{{sel}}}[{w}]))"),
            generation_tokens_per_second=self._scalar(f"sum(rate({names.generation_tokens}{{{sel}}}[{w}]))"),
        )

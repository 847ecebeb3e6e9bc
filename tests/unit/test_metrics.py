"""Metric names, parsing with prometheus_client, and signals — including the real vLLM 0.32.0 page."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvpilot.metrics.names import metric_names
from kvpilot.metrics.parse import Histogram, MetricsError, parse_metrics
from kvpilot.metrics.signals import fleet_signals, replica_window
from kvpilot.versions import VersionLine

V33 = metric_names(VersionLine(0, 33))


def page(
    waiting: float = 0,
    running: float = 1,
    kv: float = 0.5,
    queue: tuple[float, ...] = (0, 0, 0, 0),
    finished: float = 0,
    kv_name: str = "vllm:kv_cache_usage_perc",
) -> str:
    """A vLLM-shaped page; queue holds cumulative counts for buckets 0.3, 0.5, 0.8, +Inf."""
    lines = [
        "# TYPE vllm:num_requests_waiting gauge",
        f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}',
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}',
        f"# TYPE {kv_name} gauge",
        f'{kv_name}{{engine="0",model_name="m"}} {kv}',
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} {finished}',
        "# TYPE vllm:request_queue_time_seconds histogram",
    ]
    for le, count in zip(("0.3", "0.5", "0.8", "+Inf"), queue, strict=True):
        lines.append(f'vllm:request_queue_time_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {count}')
    lines.append(f'vllm:request_queue_time_seconds_count{{engine="0",model_name="m"}} {queue[-1]}')
    lines.append(f'vllm:request_queue_time_seconds_sum{{engine="0",model_name="m"}} {queue[-1] * 0.4}')
    return "\n".join(lines) + "\n"


def test_names_follow_the_renames() -> None:
    assert metric_names(VersionLine(0, 8)).kv_cache_usage == ("vllm:gpu_cache_usage_perc",)
    assert metric_names(VersionLine(0, 10)).kv_cache_usage[1] == "vllm:gpu_cache_usage_perc"
    assert metric_names(VersionLine(0, 12)).kv_cache_usage == ("vllm:kv_cache_usage_perc",)
    assert metric_names(VersionLine(0, 9)).inter_token == ("vllm:time_per_output_token_seconds",)
    assert V33.inter_token == ("vllm:inter_token_latency_seconds",)


def test_every_signal_reads_from_the_real_vllm_032_page(shared_dir: Path) -> None:
    text = (shared_dir / "fixtures" / "vllm-0.32.0-cpu-metrics.txt").read_text()
    names = metric_names(VersionLine(0, 32))
    scrape = parse_metrics(text, 0)
    assert scrape.first(names.kv_cache_usage) is not None
    for gauge in (names.waiting, names.running):
        assert gauge in scrape.gauges
    for counter in (names.preemptions, names.finished, names.generation_tokens):
        assert counter in scrape.counters
    for hist in (names.queue_time, names.ttft, names.inter_token[0]):
        assert scrape.histograms[hist].count > 0
    assert scrape.counters[names.generation_tokens] == 16.0
    assert scrape.histograms[names.queue_time].buckets[-1][0] == float("inf")


def test_old_kv_name_is_an_alias() -> None:
    old = parse_metrics(page(kv=0.7, kv_name="vllm:gpu_cache_usage_perc"), 0)
    assert old.first(metric_names(VersionLine(0, 9)).kv_cache_usage) == 0.7
    assert old.first(V33.kv_cache_usage) is None  # 0.33 does not read a name it no longer emits


@pytest.mark.parametrize(
    "garbage", ["", "<html><body>502 Bad Gateway</body></html>", "vllm:num_requests_waiting abc\n"]
)
def test_garbled_pages_are_errors(garbage: str) -> None:
    with pytest.raises(MetricsError):
        parse_metrics(garbage, 0)


def test_a_page_without_vllm_signals_is_unknown() -> None:
    with pytest.raises(MetricsError, match="not vLLM"):
        replica_window(parse_metrics("# TYPE x gauge\nx 1\n", 0), None, V33)
    with pytest.raises(MetricsError):  # 0.33 names on a 0.8 page
        replica_window(parse_metrics(page(kv_name="vllm:gpu_cache_usage_perc"), 0), None, V33)


def test_histogram_quantile_matches_promql() -> None:
    h = Histogram(((0.3, 10.0), (0.5, 20.0), (0.8, 20.0), (float("inf"), 20.0)), 20, 5)
    # rank 18 falls in (0.3, 0.5]: 0.3 + 0.2 × (18 - 10) / 10
    assert h.quantile(0.9) == pytest.approx(0.46)
    assert Histogram(((1.0, 0.0), (float("inf"), 0.0)), 0, 0).quantile(0.9) is None
    assert Histogram(((1.0, 0.0), (float("inf"), 5.0)), 5, 50).quantile(0.9) == 1.0
    assert h.quantile_bound(0.9) == 0.5 and h.mean == 0.25
    fast = Histogram(((0.3, 10.0), (0.5, 10.0), (float("inf"), 10.0)), 10, 0.1)
    assert fast.quantile(0.9) == pytest.approx(0.27) and fast.quantile_bound(0.9) == 0.3


def test_windows_use_deltas_and_survive_restarts() -> None:
    t0 = parse_metrics(page(queue=(10, 10, 10, 10), finished=100), 0)
    t1 = parse_metrics(page(waiting=3, queue=(10, 12, 20, 30), finished=160), 30)
    w = replica_window(t1, t0, V33)
    assert w.queue_time is not None and w.queue_time.count == 20
    assert w.finished == 60 and w.seconds == 30
    fleet = fleet_signals([w])
    assert fleet.finished_per_second == pytest.approx(2.0)
    assert fleet.queue_wait_p90 == pytest.approx(0.8)  # 20 new: 2 ≤ 0.5 s, 8 ≤ 0.8 s, 10 beyond
    restarted = parse_metrics(page(queue=(1, 1, 1, 1), finished=5), 60)
    assert replica_window(restarted, t1, V33).finished == 5
    first = replica_window(t0, None, V33)
    assert first.queue_time is None and fleet_signals([first]).finished_per_second is None


def test_fleet_merges_replicas() -> None:
    a = replica_window(
        parse_metrics(page(kv=0.2, running=2, queue=(1, 1, 1, 1)), 10),
        parse_metrics(page(kv=0.2, queue=(0, 0, 0, 0)), 0),
        V33,
    )
    b = replica_window(
        parse_metrics(page(kv=0.6, running=4, waiting=1, queue=(0, 0, 0, 3)), 10),
        parse_metrics(page(kv=0.6, queue=(0, 0, 0, 0)), 0),
        V33,
    )
    fleet = fleet_signals([a, b])
    assert fleet.replicas_reporting == 2
    assert fleet.kv_usage_mean == pytest.approx(0.4) and fleet.kv_usage_max == pytest.approx(0.6)
    assert (fleet.running, fleet.waiting) == (6, 1)
    assert fleet.queue_wait_p90 == pytest.approx(0.8)

"""vLLM metric names by release line: one table, used by both metric sources and the alert rules.

Sources: vLLM's V1 PrometheusStatLogger in the wheels of 0.8.5 … 0.33.0 (see the developers'
vllm-facts notes). Counters are exposed with ``_total``; histograms as ``_bucket``/``_sum``/``_count``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpilot.versions import VersionLine


@dataclass(frozen=True)
class MetricNames:
    kv_cache_usage: tuple[str, ...]  # gauge 0..1, first name present wins
    queue_time: str  # histogram: seconds a request spent WAITING before it ran
    waiting: str  # gauge
    running: str  # gauge
    preemptions: str  # counter
    finished: str  # counter: requests finished, for the arrival rate
    generation_tokens: str  # counter
    ttft: str  # histogram
    inter_token: tuple[str, ...]  # histogram, first name present wins


def metric_names(line: VersionLine) -> MetricNames:
    # gpu_cache_usage_perc was renamed kv_cache_usage_perc in 0.9 (both emitted 0.9-0.10, old one hidden in
    # 0.11, gone in 0.12); time_per_output_token became inter_token_latency in 0.10 (old one gone by 0.16).
    if line <= VersionLine(0, 8):
        kv: tuple[str, ...] = ("vllm:gpu_cache_usage_perc",)
    elif line <= VersionLine(0, 11):
        kv = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    else:
        kv = ("vllm:kv_cache_usage_perc",)
    if line <= VersionLine(0, 9):
        itl: tuple[str, ...] = ("vllm:time_per_output_token_seconds",)
    elif line <= VersionLine(0, 12):
        itl = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
    else:
        itl = ("vllm:inter_token_latency_seconds",)
    return MetricNames(
        kv_cache_usage=kv,
        queue_time="vllm:request_queue_time_seconds",
        waiting="vllm:num_requests_waiting",
        running="vllm:num_requests_running",
        preemptions="vllm:num_preemptions_total",
        finished="vllm:request_success_total",
        generation_tokens="vllm:generation_tokens_total",
        ttft="vllm:time_to_first_token_seconds",
        inter_token=itl,
    )

"""Prometheus rules and the Grafana dashboard, generated from the same metric alias table the
autoscaler reads (``kvpilot.metrics.names``), so alerts, dashboards and scaling decisions agree.

``hack/generate.sh`` writes them into the Helm chart (``charts/kvpilot/files``); a test regenerates and
diffs them. vLLM series carry ``namespace`` and, through the PodMonitor kvpilot renders, the
``llmdeployment`` they belong to. The operator's own series (``kvpilot_*``, see ``kvpilot.telemetry``)
carry the same two labels.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from kvpilot.metrics.names import MetricNames, metric_names
from kvpilot.versions import NEWEST_SUPPORTED, OLDEST_SUPPORTED, supported_lines

BY = "namespace, llmdeployment"
WINDOW = "5m"


def _union(pick: Any) -> list[str]:
    """Every name a signal has had across the supported vLLM lines, newest first."""
    names: list[str] = []
    for line in reversed(supported_lines()):
        picked = pick(metric_names(line))
        for name in picked if isinstance(picked, tuple) else (picked,):
            if name not in names:
                names.append(name)
    return names


def _gauge(names: list[str]) -> str:
    # `or` keeps one series per pod: a vLLM that exports both names during a rename counts once.
    return " or ".join(names)


def _histogram_quantile(q: float, names: list[str]) -> str:
    rates = " or ".join(f"rate({name}_bucket[{WINDOW}])" for name in names)
    return f"histogram_quantile({q}, sum by ({BY}, le) ({rates}))"


def recording_rules() -> list[dict[str, str]]:
    n: MetricNames = metric_names(NEWEST_SUPPORTED)
    kv = _union(lambda m: m.kv_cache_usage)
    itl = _union(lambda m: m.inter_token)
    return [
        {"record": "llmdeployment:vllm_queue_wait_seconds:p90", "expr": _histogram_quantile(0.9, [n.queue_time])},
        {"record": "llmdeployment:vllm_kv_cache_usage:avg", "expr": f"avg by ({BY}) ({_gauge(kv)})"},
        {"record": "llmdeployment:vllm_kv_cache_usage:max", "expr": f"max by ({BY}) ({_gauge(kv)})"},
        {"record": "llmdeployment:vllm_requests_waiting:sum", "expr": f"sum by ({BY}) ({n.waiting})"},
        {"record": "llmdeployment:vllm_requests_running:sum", "expr": f"sum by ({BY}) ({n.running})"},
        {
            "record": "llmdeployment:vllm_requests_finished:rate5m",
            "expr": f"sum by ({BY}) (rate({n.finished}[{WINDOW}]))",
        },
        {"record": "llmdeployment:vllm_preemptions:rate5m", "expr": f"sum by ({BY}) (rate({n.preemptions}[{WINDOW}]))"},
        {
            "record": "llmdeployment:vllm_generation_tokens:rate5m",
            "expr": f"sum by ({BY}) (rate({n.generation_tokens}[{WINDOW}]))",
        },
        {"record": "llmdeployment:vllm_ttft_seconds:p90", "expr": _histogram_quantile(0.9, [n.ttft])},
        {"record": "llmdeployment:vllm_inter_token_seconds:p90", "expr": _histogram_quantile(0.9, itl)},
    ]


# Alert name → the chart value that sets how long its condition must hold.
ALERT_FOR_VALUES = {
    "KvpilotKVCacheNearlyFull": "kvCacheHighFor",
    "KvpilotQueueWaitAboveSLO": "queueWaitAboveSloFor",
    "KvpilotReplicasPinnedAtMax": "replicasAtMaxFor",
    "KvpilotReplicasUnavailable": "unavailableFor",
    "KvpilotMetricsMissing": "metricsMissingFor",
}


def alert_rules() -> list[dict[str, Any]]:
    where = "{{ $labels.namespace }}/{{ $labels.llmdeployment }}"
    return [
        {
            "alert": "KvpilotKVCacheNearlyFull",
            "expr": "llmdeployment:vllm_kv_cache_usage:avg > 0.9",
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "vLLM KV cache above 90 %",
                "description": f"{where}: the KV cache is {{{{ $value | humanizePercentage }}}} full; requests "
                "will queue or be preempted. Raise maxReplicas, shorten maxModelLen or use a bigger GPU.",
            },
        },
        {
            "alert": "KvpilotQueueWaitAboveSLO",
            "expr": "llmdeployment:vllm_queue_wait_seconds:p90 > on (namespace, llmdeployment) "
            "kvpilot_queue_wait_slo_seconds",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Queue wait p90 above the LLMDeployment's SLO",
                "description": f"{where}: requests wait {{{{ $value | humanizeDuration }}}} (p90) before vLLM "
                "runs them, above spec.autoscaling.queueWaitP90Seconds.",
            },
        },
        {
            "alert": "KvpilotReplicasPinnedAtMax",
            "expr": "kvpilot_desired_replicas >= on (namespace, llmdeployment) kvpilot_max_replicas",
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Autoscaler pinned at maxReplicas",
                "description": f"{where}: the autoscaler wants more than maxReplicas allows; latency targets "
                "are at risk.",
            },
        },
        {
            "alert": "KvpilotReplicasUnavailable",
            "expr": "kvpilot_ready_replicas < on (namespace, llmdeployment) kvpilot_desired_replicas",
            "for": "15m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "vLLM replicas not ready",
                "description": f"{where}: fewer replicas are ready than desired; check "
                "`kubectl describe llmd` and the pods' events (GPU capacity, image pulls, OOM).",
            },
        },
        {
            "alert": "KvpilotMetricsMissing",
            "expr": 'kvpilot_llmdeployment_condition{type="MetricsAvailable"} == 0',
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Autoscaler is blind",
                "description": f"{where}: kvpilot cannot read vLLM metrics, so it holds the replica count; "
                "see the MetricsAvailable condition for the reason.",
            },
        },
    ]


def prometheus_rules() -> dict[str, Any]:
    return {
        "groups": [
            {"name": "kvpilot.recording", "interval": "30s", "rules": recording_rules()},
            {"name": "kvpilot.alerts", "rules": alert_rules()},
        ]
    }


def prometheus_rules_yaml() -> str:
    head = "# Generated by hack/generate.sh from kvpilot.observability; edit that, not this.\n"
    return head + yaml.safe_dump(prometheus_rules(), sort_keys=False, width=1000)


def _panel(panel_id: int, title: str, exprs: list[tuple[str, str]], unit: str, x: int, y: int) -> dict[str, Any]:
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend} for i, (expr, legend) in enumerate(exprs)
        ],
    }


def dashboard() -> dict[str, Any]:
    sel = 'namespace="$namespace", llmdeployment=~"$llmdeployment"'
    n = metric_names(NEWEST_SUPPORTED)
    legend = "{{llmdeployment}}"
    panels = [
        _panel(
            1,
            "Queue wait p90 vs SLO",
            [
                (f"llmdeployment:vllm_queue_wait_seconds:p90{{{sel}}}", legend),
                (f"kvpilot_queue_wait_slo_seconds{{{sel}}}", "SLO {{llmdeployment}}"),
            ],
            "s",
            0,
            0,
        ),
        _panel(
            2,
            "KV-cache usage",
            [
                (f"llmdeployment:vllm_kv_cache_usage:avg{{{sel}}}", "mean {{llmdeployment}}"),
                (f"llmdeployment:vllm_kv_cache_usage:max{{{sel}}}", "max {{llmdeployment}}"),
            ],
            "percentunit",
            12,
            0,
        ),
        _panel(
            3,
            "Desired vs ready replicas",
            [
                (f"kvpilot_desired_replicas{{{sel}}}", "desired {{llmdeployment}}"),
                (f"kvpilot_ready_replicas{{{sel}}}", "ready {{llmdeployment}}"),
                (f"kvpilot_max_replicas{{{sel}}}", "max {{llmdeployment}}"),
            ],
            "short",
            0,
            8,
        ),
        _panel(4, "Time to first token p90", [(f"llmdeployment:vllm_ttft_seconds:p90{{{sel}}}", legend)], "s", 12, 8),
        _panel(
            5,
            "Generation tokens/s",
            [
                (f"llmdeployment:vllm_generation_tokens:rate5m{{{sel}}}", legend),
            ],
            "short",
            0,
            16,
        ),
        _panel(
            6,
            "Requests running and waiting",
            [
                (f"llmdeployment:vllm_requests_running:sum{{{sel}}}", "running {{llmdeployment}}"),
                (f"llmdeployment:vllm_requests_waiting:sum{{{sel}}}", "waiting {{llmdeployment}}"),
            ],
            "short",
            12,
            16,
        ),
        # DCGM exporter series carry the pod they measure; kvpilot's pods are named after their LLMDeployment.
        _panel(
            7,
            "GPU utilization (DCGM)",
            [
                (
                    'avg by (pod) (DCGM_FI_DEV_GPU_UTIL{namespace="$namespace", pod=~"($llmdeployment)-.*"}) / 100',
                    "{{pod}}",
                ),
            ],
            "percentunit",
            0,
            24,
        ),
        _panel(8, "Preemptions/s", [(f"llmdeployment:vllm_preemptions:rate5m{{{sel}}}", legend)], "short", 12, 24),
    ]
    return {
        "title": "kvpilot / vLLM fleets",
        "uid": "kvpilot-fleets",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "tags": ["kvpilot", "vllm"],
        "description": f"Generated from kvpilot's metric table (vLLM {OLDEST_SUPPORTED}–{NEWEST_SUPPORTED}; "
        f"queue wait from {n.queue_time}).",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
                {
                    "name": "namespace",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": "label_values(kvpilot_desired_replicas, namespace)",
                    "refresh": 2,
                },
                {
                    "name": "llmdeployment",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": 'label_values(kvpilot_desired_replicas{namespace="$namespace"}, llmdeployment)',
                    "refresh": 2,
                    "multi": True,
                    "includeAll": True,
                },
            ]
        },
        "panels": panels,
    }


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=False) + "\n"

"""The generated Prometheus rules under the real promtool (Debian's prometheus package): they parse, and
each alert fires on the series vLLM and the operator export, and stays quiet when things are fine."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvpilot import telemetry
from kvpilot.observability import dashboard, prometheus_rules, prometheus_rules_yaml

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (.ci/run installs Debian's prometheus)"
)

WHERE = "{{ $labels.namespace }}/{{ $labels.llmdeployment }}"
P90 = "llmdeployment:vllm_queue_wait_seconds:p90"
KV_AVG = "llmdeployment:vllm_kv_cache_usage:avg"


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_rules_parse(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(prometheus_rules_yaml())
    result = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 15 rules found" in result.stdout


def _annotations(alert: str, namespace: str, name: str, value: str = "") -> dict[str, str]:
    rule = next(r for g in prometheus_rules()["groups"] for r in g["rules"] if r.get("alert") == alert)
    out = {}
    for key, text in rule["annotations"].items():
        text = text.replace(WHERE, f"{namespace}/{name}")
        for fn in ("humanizePercentage", "humanizeDuration"):
            text = text.replace(f"{{{{ $value | {fn} }}}}", value)
        out[key] = text
    return out


def _expect(alert: str, name: str, value: str = "", severity: str = "warning", **labels: str) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": severity, "namespace": "llm", "llmdeployment": name, **labels},
        "exp_annotations": _annotations(alert, "llm", name, value),
    }


def _series(metric: str, name: str, values: str, **labels: str) -> dict[str, str]:
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return {"series": f'{metric}{{namespace="llm",llmdeployment="{name}"{extra}}}', "values": values}


def test_alerts_fire_on_real_series_and_stay_quiet_otherwise(tmp_path: Path) -> None:
    queue = "vllm:request_queue_time_seconds_bucket"
    series = [
        # KV cache: the current name, the pre-0.9 name (the alias table), and a calm one.
        _series("vllm:kv_cache_usage_perc", "full", "0.95x30", pod="full-1"),
        _series("vllm:gpu_cache_usage_perc", "full-old-vllm", "0.97x30", pod="old-1"),
        _series("vllm:kv_cache_usage_perc", "calm", "0.5x30", pod="calm-1"),
        # Queue wait: 60 requests a minute, all between 1 s and 2.5 s in the queue: p90 = 2.35 s > SLO 0.5 s.
        _series(queue, "slow", "0x30", pod="slow-1", le="0.5"),
        _series(queue, "slow", "0x30", pod="slow-1", le="1"),
        _series(queue, "slow", "0+60x30", pod="slow-1", le="2.5"),
        _series(queue, "slow", "0+60x30", pod="slow-1", le="+Inf"),
        _series("kvpilot_queue_wait_slo_seconds", "slow", "0.5x30"),
        _series("kvpilot_queue_wait_slo_seconds", "calm", "0.5x30"),
        # Replicas: pinned at max; below max; not all ready.
        _series("kvpilot_desired_replicas", "pinned", "4x30"),
        _series("kvpilot_max_replicas", "pinned", "4x30"),
        _series("kvpilot_ready_replicas", "pinned", "4x30"),
        _series("kvpilot_desired_replicas", "calm", "2x30"),
        _series("kvpilot_max_replicas", "calm", "4x30"),
        _series("kvpilot_ready_replicas", "calm", "2x30"),
        _series("kvpilot_desired_replicas", "stuck", "3x30"),
        _series("kvpilot_max_replicas", "stuck", "8x30"),
        _series("kvpilot_ready_replicas", "stuck", "1x30"),
        # The autoscaler cannot read metrics for one of them.
        _series("kvpilot_llmdeployment_condition", "blind", "0x30", type="MetricsAvailable"),
        _series("kvpilot_llmdeployment_condition", "calm", "1x30", type="MetricsAvailable"),
    ]
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": 'llmdeployment:vllm_queue_wait_seconds:p90{llmdeployment="slow"}',
                        "eval_time": "20m",
                        "exp_samples": [
                            {
                                "labels": P90 + '{namespace="llm",llmdeployment="slow"}',
                                "value": 2.35,
                            }
                        ],
                    },
                    {
                        "expr": "llmdeployment:vllm_kv_cache_usage:avg",
                        "eval_time": "5m",
                        "exp_samples": [
                            {
                                "labels": KV_AVG + f'{{namespace="llm",llmdeployment="{n}"}}',
                                "value": v,
                            }
                            for n, v in (("full", 0.95), ("full-old-vllm", 0.97), ("calm", 0.5))
                        ],
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "KvpilotKVCacheNearlyFull",
                        "exp_alerts": [
                            _expect("KvpilotKVCacheNearlyFull", "full", "95%"),
                            _expect("KvpilotKVCacheNearlyFull", "full-old-vllm", "97%"),
                        ],
                    },
                    {"eval_time": "3m", "alertname": "KvpilotKVCacheNearlyFull", "exp_alerts": []},  # not for 5m yet
                    {
                        "eval_time": "20m",
                        "alertname": "KvpilotQueueWaitAboveSLO",
                        "exp_alerts": [_expect("KvpilotQueueWaitAboveSLO", "slow", "2.35s")],
                    },
                    {
                        "eval_time": "20m",
                        "alertname": "KvpilotReplicasPinnedAtMax",
                        "exp_alerts": [_expect("KvpilotReplicasPinnedAtMax", "pinned")],
                    },
                    {
                        "eval_time": "20m",
                        "alertname": "KvpilotReplicasUnavailable",
                        "exp_alerts": [_expect("KvpilotReplicasUnavailable", "stuck", severity="critical")],
                    },
                    {
                        "eval_time": "15m",
                        "alertname": "KvpilotMetricsMissing",
                        "exp_alerts": [_expect("KvpilotMetricsMissing", "blind", type="MetricsAvailable")],
                    },
                ],
            }
        ],
    }
    (tmp_path / "rules.yaml").write_text(prometheus_rules_yaml())
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_dashboard_query_parses_and_reads_series_kvpilot_provides(tmp_path: Path) -> None:
    """Each Grafana panel's PromQL goes through the real parser (as a recording rule under promtool) and names
    only series that exist: the chart's recording rules, the operator's own metrics, or DCGM's."""
    queries = [target["expr"] for panel in dashboard()["panels"] for target in panel["targets"]]
    assert len(queries) >= 10
    concrete = [q.replace("$namespace", "llm").replace("$llmdeployment", "chat|code") for q in queries]
    rules = {
        "groups": [
            {"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": q} for i, q in enumerate(concrete)]}
        ]
    }
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", "dashboard.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(concrete)} rules found" in result.stdout

    recorded = {r["record"] for g in prometheus_rules()["groups"] for r in g["rules"] if "record" in r}
    exported = set()
    for family in telemetry.REGISTRY.collect():
        exported |= {family.name, *(sample.name for sample in family.samples), f"{family.name}_total"}
    provided = recorded | exported | {"DCGM_FI_DEV_GPU_UTIL"}
    variables = [v["query"] for v in dashboard()["templating"]["list"] if v["type"] == "query"]
    named = {m for q in [*queries, *variables] for m in re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\{", q)}
    assert named and named <= provided, sorted(named - provided)

"""kvpilot against a real, running vLLM 0.32.0: its parser accepts every example's rendered command
line (and refuses the flags kvpilot refuses), both metric sources read the real /metrics, and a queue
built by real requests makes kvpilot's decision scale up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from kvpilot.autoscale.decision import ScaleState, Targets, decide
from kvpilot.metrics.names import metric_names
from kvpilot.metrics.sources import PodTarget, PrometheusSource, ScrapeSource
from kvpilot.pipeline import parse_llmdeployment, render_all
from kvpilot.render.objects import RenderContext
from kvpilot.versions import VersionLine
from tests.conftest import EXAMPLES

LINE = VersionLine(0, 32)
OBSERVED: list[Any] = []
NAMES = metric_names(LINE)

PARSE_SCRIPT = r"""
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args

results = {}
for name, argv in json.load(sys.stdin).items():
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    try:
        ns = parser.parse_args(argv)
        if ns.model_tag is not None:
            ns.model = ns.model_tag
        validate_parsed_serve_args(ns)
        results[name] = {"ok": True, "model": ns.model, "max_num_seqs": ns.max_num_seqs}
    except SystemExit as exc:
        results[name] = {"ok": False, "error": f"exit {exc.code}"}
    except Exception as exc:
        results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
print("RESULTS " + json.dumps(results))
"""


def parse_with_vllm(python: Path, argvs: dict[str, list[str]]) -> dict[str, Any]:
    run = subprocess.run(
        [str(python), "-c", PARSE_SCRIPT],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    line = next((x for x in run.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line, f"the vLLM parser script failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    results: dict[str, Any] = json.loads(line.removeprefix("RESULTS "))
    return results


def rendered_args_for_032(path: Path) -> list[str]:
    raw = yaml.safe_load(path.read_text())
    raw["spec"].setdefault("engine", {})["vllmVersion"] = "0.32.0"
    obj = parse_llmdeployment(raw)
    rendered = render_all(obj.spec, RenderContext(obj.metadata["name"], obj.metadata["namespace"], 1))
    container = rendered.objects[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["vllm", "serve"]
    return list(container["args"])


def test_vllm_parser_accepts_every_rendered_example_and_refuses_what_kvpilot_refuses(vllm_python: Path) -> None:
    argvs = {p.name: rendered_args_for_032(p) for p in EXAMPLES}
    # What kvpilot refuses for 0.32 must be what 0.32 itself refuses.
    argvs["refused:--swap-space"] = ["tiny", "--swap-space", "4"]
    argvs["refused:--disable-log-requests"] = ["tiny", "--disable-log-requests"]
    argvs["refused:--make-it-fast"] = ["tiny", "--make-it-fast"]
    results = parse_with_vllm(vllm_python, argvs)
    for name in (p.name for p in EXAMPLES):
        assert results[name]["ok"], f"{name}: vLLM 0.32.0 refused {argvs[name]}: {results[name]['error']}"
        assert results[name]["model"] == argvs[name][0]
    for name in [n for n in argvs if n.startswith("refused:")]:
        assert not results[name]["ok"], f"vLLM 0.32.0 accepts {name.split(':', 1)[1]}, which kvpilot refuses"


def complete(base: str, max_tokens: int) -> int:
    OBSERVED.append(("request", round(time.monotonic(), 1)))
    # The tiny model serves --max-model-len 256: prompt plus max_tokens must fit.
    assert max_tokens <= 250
    body = {"model": "tiny", "prompt": "hello", "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}
    response = httpx.post(f"{base}/v1/completions", json=body, timeout=120)
    OBSERVED.append(("response", round(time.monotonic(), 1), response.status_code, response.text[:80]))
    return response.status_code


LOAD_SCRIPT = r"""
import json, sys, threading, time, httpx
base, concurrent, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = httpx.Client(timeout=300, limits=httpx.Limits(max_connections=concurrent))
body = {"model": "tiny", "prompt": "hello", "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0}
codes = []
def one():
    codes.append(client.post(base + "/v1/completions", json=body).status_code)
    print(f"{time.monotonic():.1f} response {codes[-1]}", file=sys.stderr, flush=True)
threads = [threading.Thread(target=one) for _ in range(concurrent)]
print(f"{time.monotonic():.1f} sending {concurrent}", file=sys.stderr, flush=True)
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(sorted(codes)))
"""
LOADS: list[Load] = []


class Load:
    """Concurrent completions from a separate process with one shared client. Sent from threads of the
    test process itself (a client each), they starved the scraper of the GIL until the queue was gone."""

    def __init__(self, base: str, concurrent: int, max_tokens: int) -> None:
        assert max_tokens <= 250  # the tiny model serves --max-model-len 256
        OBSERVED.append(("load", round(time.monotonic(), 1), concurrent, max_tokens))
        self.process = subprocess.Popen(
            [sys.executable, "-c", LOAD_SCRIPT, base, str(concurrent), str(max_tokens)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        LOADS.append(self)

    def finish(self, timeout: float) -> list[int]:
        out, err = self.process.communicate(timeout=timeout)
        OBSERVED.append(("load done", round(time.monotonic(), 1), out.strip()[-200:], err.strip()[-300:]))
        assert self.process.returncode == 0, err[-2000:]
        codes: list[int] = json.loads(out.strip().splitlines()[-1])
        return codes

    def stop(self) -> str:
        """Kill it if a failed test left it running; what it said, for the failure's teardown output."""
        if self.process.poll() is None:
            self.process.kill()
        out, err = self.process.communicate()
        return f"load process (exit {self.process.returncode}):\n{err[-3000:]}{out[-500:]}"


@pytest.fixture(autouse=True)
def _no_load_outlives_its_test() -> Iterator[None]:
    yield
    while LOADS:
        print(LOADS.pop().stop())


def until(check: Any, timeout: float = 60, every: float = 0.3) -> Any:
    """Poll: on two shared cores the requests reach vLLM, and its gauges move, when they can."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = check()
        if last is not None:
            return last
        time.sleep(every)
    scrapes = [o[:3] for o in OBSERVED if not isinstance(o[0], str)]
    requests = [o for o in OBSERVED if isinstance(o[0], str)]
    raise AssertionError(
        f"condition not reached in {timeout} s (now {time.monotonic():.1f}); (time, running, waiting) seen: "
        f"{scrapes[-60:-30]} … {scrapes[-30:]}; requests: {requests[-12:]}; last: {last}"
    )


def target(base: str) -> PodTarget:
    port = int(base.rsplit(":", 1)[1])
    return PodTarget("tiny-0", "127.0.0.1", port)


def test_direct_scrape_reads_every_signal_from_the_real_server(
    vllm_server: str, request: pytest.FixtureRequest
) -> None:
    assert complete(vllm_server, 8) == 200
    source = ScrapeSource()
    request.addfinalizer(source.close)
    source.collect("live/tiny", [target(vllm_server)], NAMES, window=5)  # the window's start
    # --max-num-seqs 1: one runs, the rest wait. About a minute of queue (0.6 s per completion), so that
    # scrapes stalled for seconds by a busy machine still see it.
    load = Load(vllm_server, 100, 240)

    def queueing() -> Any:
        sig = source.collect("live/tiny", [target(vllm_server)], NAMES, window=5)
        OBSERVED.append((round(time.monotonic(), 1), sig.running, sig.waiting))
        return sig if sig.running == 1 and sig.waiting >= 2 else None

    signals = until(queueing)
    assert set(load.finish(timeout=300)) == {200}
    assert signals.replicas_reporting == 1
    assert signals.running == 1 and signals.waiting >= 2, signals
    assert signals.kv_usage_mean is not None and 0 < signals.kv_usage_mean <= 1
    after = source.collect("live/tiny", [target(vllm_server)], NAMES, window=5)
    assert after.queue_wait_p90 is not None and after.queue_wait_p90 > 0.3, after  # they queued for real
    assert after.finished_per_second and after.finished_per_second > 0


@pytest.fixture
def prometheus(vllm_server: str, tmp_path: Path) -> Any:
    from tests.integration.prometheus import PrometheusServer

    try:
        # vLLM's /metrics answers slowly while it serves (two shared cores): allow a scrape 4 s.
        server = PrometheusServer(
            tmp_path,
            [(vllm_server.removeprefix("http://"), {"namespace": "live", "pod": "tiny-5d8f9c7b4-x2k9p"})],
            scrape_interval="5s",
            scrape_timeout="4s",
        )
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    server.start()
    yield server
    server.stop()


def test_prometheus_source_reads_the_real_server_through_a_real_prometheus(vllm_server: str, prometheus: Any) -> None:
    """Through a real Prometheus: the server is found, and after real queueing its p90 queue wait, KV
    usage and completions come back. (Running/waiting mid-load are read by the direct-scrape test:
    vLLM's /metrics stalls while it serves on two shared cores, longer than a Prometheus scrape waits.)"""
    source = PrometheusSource(prometheus.url)
    until(lambda: prometheus.query(f"{NAMES.running}") or None)
    idle = source.collect("live", "tiny", NAMES, window=60)
    assert idle.replicas_reporting == 1 and idle.running >= 0 and idle.waiting >= 0, idle
    assert set(Load(vllm_server, 10, 240).finish(timeout=300)) == {200}

    def queued() -> Any:
        sig = source.collect("live", "tiny", NAMES, window=60)
        OBSERVED.append((round(time.monotonic(), 1), sig.running, sig.waiting))
        return sig if sig.queue_wait_p90 is not None and sig.queue_wait_p90 > 0.3 else None

    after = until(queued)
    assert after.kv_usage_mean is not None and after.finished_per_second and after.finished_per_second > 0, after


def test_a_real_queue_makes_kvpilot_scale_up(vllm_server: str, request: pytest.FixtureRequest) -> None:
    source = ScrapeSource()
    request.addfinalizer(source.close)
    targets = Targets(
        min_replicas=1, max_replicas=4, queue_wait_p90_seconds=0.5, kv_cache_usage=0.8, slots_per_replica=1
    )
    source.collect("live/decide", [target(vllm_server)], NAMES, window=10)
    load = Load(vllm_server, 100, 240)
    seen: list[Any] = []

    def scaled_up() -> Any:
        signals = source.collect("live/decide", [target(vllm_server)], NAMES, window=10)
        decision = decide(signals, 1, 1, targets, ScaleState(), now=time.monotonic())
        seen.append((signals, decision))
        OBSERVED.append((round(time.monotonic(), 1), signals.running, signals.waiting, decision.reason))
        return (signals, decision) if decision.action == "up" else None

    signals, decision = until(scaled_up, every=0.5)
    assert set(load.finish(timeout=300)) == {200}
    assert decision.replicas > 1, decision
    print(f"\nreal signals: {signals}\ndecision: {decision.reason}")

"""A stand-in for a vLLM pod's /metrics: vLLM's metric names, labels and buckets, rendered by prometheus_client.

Only the numbers are controlled by the test; the text format is the real one (the same library vLLM
uses). It binds to a pod's loopback IP (kwok hands out 127.1.x.x), so the operator scrapes it exactly
as it would scrape a pod.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# vLLM's request-latency buckets (vllm/v1/metrics/buckets.py).
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0)
LABELS = ["model_name", "engine"]


class FakeVllm:
    def __init__(self, host: str, port: int, model: str = "m") -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.running = Gauge("vllm:num_requests_running", "Running.", LABELS, registry=r).labels(model, "0")
        self.waiting = Gauge("vllm:num_requests_waiting", "Waiting.", LABELS, registry=r).labels(model, "0")
        self.kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage.", LABELS, registry=r).labels(model, "0")
        self.queue = Histogram(
            "vllm:request_queue_time_seconds", "Queue time.", LABELS, buckets=LATENCY_BUCKETS, registry=r
        ).labels(model, "0")
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "TTFT.", LABELS, buckets=LATENCY_BUCKETS, registry=r
        ).labels(model, "0")
        self.success = Counter("vllm:request_success", "Finished.", [*LABELS, "finished_reason"], registry=r).labels(
            model, "0", "stop"
        )
        self.preemptions = Counter("vllm:num_preemptions", "Preemptions.", LABELS, registry=r).labels(model, "0")
        self.tokens = Counter("vllm:generation_tokens", "Tokens.", LABELS, registry=r).labels(model, "0")
        self.queue_wait = 0.01
        self.rate = 2.0  # requests per second leaving the queue
        self.hang = False
        self._stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if fake.hang:
                    fake._stop.wait(30)
                body = generate_latest(fake.registry) if self.path == "/metrics" else b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.threads = [
            threading.Thread(target=self.server.serve_forever, daemon=True),
            threading.Thread(target=self._load, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def set(self, *, running: float, waiting: float, kv: float, queue_wait: float, rate: float = 2.0) -> None:
        self.running.set(running)
        self.waiting.set(waiting)
        self.kv.set(kv)
        self.queue_wait, self.rate = queue_wait, rate

    def _load(self) -> None:
        tick = 0.25
        while not self._stop.wait(tick):
            for _ in range(max(1, round(self.rate * tick))):
                self.queue.observe(self.queue_wait)
                self.ttft.observe(self.queue_wait + 0.05)
                self.success.inc()
                self.tokens.inc(20)

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

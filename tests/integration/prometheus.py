"""A real Prometheus (Debian's package) on loopback, scraping static targets with pod-like labels."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from kvpilot.localcluster.process import free_port


class PrometheusServer:
    def __init__(
        self,
        workdir: Path,
        targets: list[tuple[str, dict[str, str]]],
        scrape_interval: str = "1s",
        scrape_timeout: str = "1s",
    ) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise FileNotFoundError("prometheus is not installed (Debian package `prometheus`; .ci/run installs it)")
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": [
                {
                    "job_name": "vllm",
                    "scrape_timeout": scrape_timeout,
                    "static_configs": [{"targets": [address], "labels": labels} for address, labels in targets],
                }
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> PrometheusServer:
        with (self.workdir / "prometheus.log").open("ab") as log:
            self.proc = self._spawn(log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"prometheus not ready: {(self.workdir / 'prometheus.log').read_text()[-2000:]}")

    def _spawn(self, log: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def query(self, promql: str) -> list[Any]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as r:
            return list(json.loads(r.read())["data"]["result"])

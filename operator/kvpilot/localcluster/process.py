"""Run `kvpilot run` as a real process against a test cluster, with its log kept for failures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def end_process(proc: subprocess.Popen[bytes], kill: bool = False, timeout: float = 30) -> None:
    """SIGTERM (or SIGKILL), wait up to ``timeout`` seconds, then SIGKILL whatever is left."""
    if kill:
        proc.kill()
    else:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class OperatorProcess:
    def __init__(
        self,
        kubeconfig: Path,
        log_dir: Path,
        resync_seconds: float = 5,
        extra_args: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
    ):
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.resync_seconds = resync_seconds
        self.extra_args = extra_args
        self.extra_env = dict(extra_env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = 0
        self.metrics_port = 0
        self.log: Path | None = None
        self.starts = 0

    def start(self, timeout: float = 60) -> OperatorProcess:
        self.starts += 1
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.log = self.log_dir / f"operator-{self.starts}.log"
        env = dict(
            os.environ,
            KUBECONFIG=str(self.kubeconfig),
            KVPILOT_HEALTH_ADDRESS=f"127.0.0.1:{self.health_port}",
            KVPILOT_METRICS_ADDRESS=f"127.0.0.1:{self.metrics_port}",
            PYTHONUNBUFFERED="1",
            **self.extra_env,
        )
        cmd = [sys.executable, "-m", "kvpilot", "run", "--resync-seconds", str(self.resync_seconds), *self.extra_args]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"operator exited {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"operator not healthy after {timeout}s:\n{self.tail()}")

    def stop(self, kill: bool = False) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        end_process(self.proc, kill=kill)

    def tail(self, lines: int = 60) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

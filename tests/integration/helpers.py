"""Helpers shared by the integration tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def eventually(check: Callable[[], T | None], timeout: float = 60, interval: float = 0.5, what: str = "") -> T:
    """Poll until ``check`` returns something truthy; fail with the last value otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # a transient API error while polling is not the assertion
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or check.__name__}; last: {last!r}")

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.yaml") if "argocd" not in p.parts)


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"../shared is absent ({SHARED}): fixtures recorded from real vLLM are not available here")
    return SHARED

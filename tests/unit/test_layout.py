"""operator/ is a source root, never a package: it must not shadow the standard library's operator."""

from __future__ import annotations

import importlib
import subprocess
import sys

from tests.conftest import ROOT


def test_operator_dir_is_not_a_package() -> None:
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_import_operator_is_the_standard_library() -> None:
    # Run from the repository root, where a package named operator would win the import.
    code = "import operator, sys; print(operator.__file__ or ''); print(hasattr(operator, 'itemgetter'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    path, has_itemgetter = out.stdout.split("\n")[:2]
    assert has_itemgetter == "True"
    assert "operator/" not in path.replace(str(ROOT), "") or "lib" in path


def test_kvpilot_imports_from_operator_source_root() -> None:
    module = importlib.import_module("kvpilot")
    assert module.__file__ is not None
    assert module.__file__.replace("\\", "/").endswith("operator/kvpilot/__init__.py")


def test_pure_core_does_not_import_the_shell() -> None:
    """Sizing, rendering and the API never reach for kopf, kubernetes or httpx."""
    code = (
        "import sys\n"
        "import kvpilot.pipeline, kvpilot.api.crd, kvpilot.cli, kvpilot.status\n"
        "import kvpilot.autoscale.decision, kvpilot.metrics.signals, kvpilot.simulate.compare\n"
        "bad = [m for m in ('kopf', 'kubernetes', 'httpx') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

"""The shipped flag tables are exactly what hack/vllm/extract_flags.py makes from the vLLM sources they record.

A table records the PyPI file it was made from and its sha256; these tests rebuild tables from those files
(cached in ~/.cache/kvpilot/vllm-sdists, downloaded from PyPI when absent) and compare the texts, so the
tables cannot drift from the extractor, nor the extractor silently change what it reads out of vLLM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTRACTOR = ROOT / "hack" / "vllm" / "extract_flags.py"
TABLES = ROOT / "operator" / "kvpilot" / "data" / "vllm_flags"
CACHE = Path(os.environ.get("KVPILOT_VLLM_SDIST_CACHE", Path.home() / ".cache" / "kvpilot" / "vllm-sdists"))
# The oldest line, the one whose defaults changed (0.20), the reference dump's (0.32) and the newest.
LINES = ["0.8", "0.20", "0.32", "0.33"]


@pytest.fixture(scope="module")
def sources() -> None:
    recorded = [json.loads((TABLES / f"{line}.json").read_text())["source_file"] for line in LINES]
    if all((CACHE / name).exists() for name in recorded):
        return
    try:
        urllib.request.urlopen("https://pypi.org/simple/vllm/", timeout=30).close()
    except OSError as exc:
        pytest.skip(f"vLLM sources {recorded} neither cached in {CACHE} nor downloadable from PyPI: {exc}")


def extract(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXTRACTOR), *args], capture_output=True, text=True, timeout=1200, check=False
    )


def test_shipped_tables_are_rebuilt_identically_from_the_sources_they_record(sources: None) -> None:
    result = extract("--reproduce", "--versions", *LINES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(", identical") == len(LINES), result.stdout


def test_a_table_that_its_source_does_not_give_is_reported(sources: None, tmp_path: Path) -> None:
    shipped = (TABLES / "0.32.json").read_text()
    table = json.loads(shipped)
    assert json.dumps(table, indent=1, ensure_ascii=False) + "\n" == shipped  # so only the edit below differs
    option = next(o for o in table["options"] if o["flags"][0] == "--max-num-seqs")
    option["default"] = 7
    (tmp_path / "0.32.json").write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    result = extract("--reproduce", "--versions", "0.32", "--out", str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[0.32] DIFFERS" in result.stdout and "RESULT: 0.32 differ" in result.stdout
    assert '-   "default": 7,' in result.stdout and '+   "default": null,' in result.stdout

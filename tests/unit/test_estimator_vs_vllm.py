"""kvpilot's VRAM estimator against what real vLLM servers logged at start-up (tests/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvpilot.catalog.gpus import get_gpu
from kvpilot.errors import CatalogError
from kvpilot.sizing.reported import compare_reported, load_reported, openai_server_defaults
from kvpilot.versions import VersionLine

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm_reported_memory.yaml"
COMPARISONS = compare_reported(load_reported(DATA))
# Entries that quote the log's own lines are held to the goals; tabulated ones are reported beside them.
HELD = [c for c in COMPARISONS if c.entry.verbatim]


def test_the_table_covers_enough_models_gpus_and_versions() -> None:
    compared = [c for c in HELD if c.skipped is None]
    assert len(compared) >= 17
    assert len({c.entry.model for c in compared}) >= 9
    assert len({c.entry.vllm_version for c in compared}) >= 4
    assert len({c.entry.tensor_parallel_size for c in compared}) >= 3


@pytest.mark.parametrize("comparison", [c for c in HELD if c.weights_error is not None], ids=lambda c: c.entry.id)
def test_weights_within_3_percent(comparison) -> None:  # type: ignore[no-untyped-def]
    reported = comparison.entry.reported.weights_gib
    assert abs(comparison.weights_error) <= 0.03, f"{comparison.weights_gib:.2f} GiB vs {reported} GiB logged"


@pytest.mark.parametrize("comparison", [c for c in HELD if c.kv_tokens_error is not None], ids=lambda c: c.entry.id)
def test_kv_cache_tokens_within_10_percent(comparison) -> None:  # type: ignore[no-untyped-def]
    reported = comparison.entry.reported.kv_cache_tokens
    assert abs(comparison.kv_tokens_error) <= 0.10, f"{comparison.kv_tokens:,} tokens vs {reported:,} logged"


def test_every_entry_names_its_source_and_quotes_the_log() -> None:
    for c in COMPARISONS:
        assert c.entry.source.startswith(("https://", "unlinked: ")), c.entry.id
        assert c.entry.quote.strip(), c.entry.id


def test_the_catalog_never_gives_a_gpu_more_memory_than_vllm_saw() -> None:
    """The catalog holds the CUDA total vLLM multiplies by gpu-memory-utilization, not nvidia-smi's larger MiB."""
    logged: dict[str, float] = {}
    for c in COMPARISONS:
        total = c.entry.total_gpu_memory_gib
        try:
            gpu = get_gpu(c.entry.gpu)
        except CatalogError:
            continue
        if total is not None:
            logged[gpu.name] = min(total, logged.get(gpu.name, total))
    assert {"L4", "A100-80GB"} <= set(logged)
    for name, total in logged.items():
        assert get_gpu(name).memory_gib <= total, f"{name}: catalog {get_gpu(name).memory_gib} GiB, vLLM saw {total}"


@pytest.mark.parametrize(
    ("gpu", "line", "expected"),
    [
        ("H100-80GB-SXM", VersionLine(0, 19), (1024, 8192)),
        ("A100-80GB", VersionLine(0, 31), (256, 2048)),
        ("L4", VersionLine(0, 28), (256, 2048)),
        ("B200", VersionLine(0, 27), (1024, 8192)),
        ("B200", VersionLine(0, 28), (1024, 16384)),
        ("MI300X", VersionLine(0, 33), (1024, 16384)),
    ],
)
def test_openai_server_defaults_follow_vllms_per_gpu_table(
    gpu: str, line: VersionLine, expected: tuple[int, int]
) -> None:
    catalog_gpu = get_gpu(gpu)
    assert openai_server_defaults(catalog_gpu.name, catalog_gpu.memory_gib, line) == expected

"""kvpilot's VRAM estimator against what real vLLM servers logged at start-up (tests/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvpilot.sizing.reported import compare_reported, load_reported

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm_reported_memory.yaml"
COMPARISONS = compare_reported(load_reported(DATA))


def test_the_table_covers_enough_models_gpus_and_versions() -> None:
    compared = [c for c in COMPARISONS if c.skipped is None]
    assert len(compared) >= 17
    assert len({c.entry.model for c in compared}) >= 9
    assert len({c.entry.vllm_version for c in compared}) >= 4
    assert len({c.entry.tensor_parallel_size for c in compared}) >= 3


@pytest.mark.parametrize(
    "comparison", [c for c in COMPARISONS if c.weights_error is not None], ids=lambda c: c.entry.id
)
def test_weights_within_3_percent(comparison) -> None:  # type: ignore[no-untyped-def]
    reported = comparison.entry.reported.weights_gib
    assert abs(comparison.weights_error) <= 0.03, f"{comparison.weights_gib:.2f} GiB vs {reported} GiB logged"


@pytest.mark.parametrize(
    "comparison", [c for c in COMPARISONS if c.kv_tokens_error is not None], ids=lambda c: c.entry.id
)
def test_kv_cache_tokens_within_10_percent(comparison) -> None:  # type: ignore[no-untyped-def]
    reported = comparison.entry.reported.kv_cache_tokens
    assert abs(comparison.kv_tokens_error) <= 0.10, f"{comparison.kv_tokens:,} tokens vs {reported:,} logged"


def test_every_entry_names_its_source_and_quotes_the_log() -> None:
    for c in COMPARISONS:
        assert c.entry.source.startswith("https://"), c.entry.id
        assert c.entry.quote.strip(), c.entry.id

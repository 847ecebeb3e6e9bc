"""kvpilot's VRAM estimator against the memory real vLLM servers logged at start-up.

    python benchmarks/estimator_vs_vllm.py

Reads tests/data/vllm_reported_memory.yaml (public logs, each with its source), replays every entry's
settings through the estimator and prints estimate vs reported with the error: weights per GPU
("Model loading took X GiB") and KV-cache tokens ("GPU KV cache size: N tokens" or GPU blocks × 16).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from kvpilot.sizing.reported import compare_reported, load_reported

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm_reported_memory.yaml"


def table(rows: list[dict[str, object]]) -> str:
    heads = list(rows[0])
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in heads]
    lines = ["  ".join(h.strip().ljust(w) for h, w in zip(heads, widths, strict=True))]
    lines += [
        "  ".join(
            str(r[h]).rjust(w) if i > 1 else str(r[h]).ljust(w)
            for i, (h, w) in enumerate(zip(heads, widths, strict=True))
        )
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.1f} %"


def main() -> int:
    comparisons = compare_reported(load_reported(DATA))
    rows = []
    for c in comparisons:
        e = c.entry
        if c.skipped:
            continue
        rows.append(
            {
                "model": e.model.split("/")[-1][:34],
                "gpu": e.gpu.split(" ")[0],
                "vllm": e.vllm_version.split(" ")[0].strip("'"),
                "tp": e.tensor_parallel_size,
                "weights GiB (vLLM)": e.reported.weights_gib if e.reported.weights_gib is not None else "",
                "kvpilot": f"{c.weights_gib:.2f}" if c.weights_gib is not None else "",
                "err": pct(c.weights_error),
                "KV tokens (vLLM)": f"{e.reported.kv_cache_tokens:,}" if e.reported.kv_cache_tokens else "",
                "kvpilot ": f"{c.kv_tokens:,}" if c.kv_tokens is not None else "",
                "err ": pct(c.kv_tokens_error),
                "from": "log" if e.verbatim else "table*",
            }
        )
    print(table(rows), end="")
    print("* the source tabulates the log's numbers instead of pasting its lines; not held to the goals")
    for title, group in (
        ("logs quoted verbatim", [c for c in comparisons if c.entry.verbatim]),
        ("every entry, tabulated ones too", comparisons),
    ):
        weights = [abs(c.weights_error) for c in group if c.weights_error is not None]
        tokens = [abs(c.kv_tokens_error) for c in group if c.kv_tokens_error is not None]
        print(f"\n{title}:")
        print(
            f"  weights: {len(weights)} entries, median |error| {statistics.median(weights) * 100:.1f} %, "
            f"worst {max(weights) * 100:.1f} % (goal ≤ 3 %)"
        )
        print(
            f"  KV-cache tokens: {len(tokens)} entries, median |error| {statistics.median(tokens) * 100:.1f} %, "
            f"worst {max(tokens) * 100:.1f} % (goal ≤ 10 %)"
        )
    skipped = [c for c in comparisons if c.skipped]
    for c in skipped:
        print(f"not compared: {c.entry.id}: {c.skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

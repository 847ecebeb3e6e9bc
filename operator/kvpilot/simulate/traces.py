"""Request traces: (arrival seconds, input tokens, output tokens), read from the public formats."""

from __future__ import annotations

import csv
import json
import math
import random
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True)
class Request:
    arrival: float
    input_tokens: int
    output_tokens: int


def _azure_time(text: str) -> float:
    # "2023-11-16 18:17:03.9799600": seven fractional digits, one more than strptime takes.
    head, _, frac = text.partition(".")
    return datetime.strptime(head, "%Y-%m-%d %H:%M:%S").timestamp() + float(f"0.{frac or 0}")


def load_azure(path: Path) -> list[Request]:
    """Azure LLM inference trace 2023: TIMESTAMP, ContextTokens, GeneratedTokens."""
    with path.open() as f:
        rows = [
            (_azure_time(r["TIMESTAMP"]), int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in csv.DictReader(f)
        ]
    start = rows[0][0]
    return [Request(t - start, max(1, i), max(1, o)) for t, i, o in rows]


def load_mooncake(path: Path) -> list[Request]:
    """Mooncake FAST'25 traces: JSONL with timestamp (ms), input_length, output_length."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    start = rows[0]["timestamp"]
    return [
        Request((r["timestamp"] - start) / 1000, max(1, r["input_length"]), max(1, r["output_length"])) for r in rows
    ]


def load_burstgpt(path: Path) -> list[Request]:
    """BurstGPT: Timestamp (s), Request tokens, Response tokens."""
    with path.open() as f:
        rows = [(float(r["Timestamp"]), int(r["Request tokens"]), int(r["Response tokens"])) for r in csv.DictReader(f)]
    start = rows[0][0]
    return [Request(t - start, max(1, i), max(1, o)) for t, i, o in rows]


def load_trace(path: Path) -> list[Request]:
    """Pick the reader from the file's first line."""
    with path.open() as f:
        first = f.readline()
    if first.lstrip().startswith("{"):
        reqs = load_mooncake(path)
    elif "ContextTokens" in first:
        reqs = load_azure(path)
    elif "Request tokens" in first:
        reqs = load_burstgpt(path)
    else:
        raise ValueError(f"{path}: not an Azure CSV, BurstGPT CSV or Mooncake JSONL trace")
    return sorted(reqs, key=lambda r: r.arrival)


def compress(requests: list[Request], speedup: float) -> list[Request]:
    """Replay faster: the same requests, arrivals ``speedup`` times closer together."""
    return [Request(r.arrival / speedup, r.input_tokens, r.output_tokens) for r in requests]


def load_rate_shape(path: Path, series: str) -> list[tuple[float, float]]:
    """ServeGen aggregate rates: (window start s, requests/s) for one category_model; gaps dropped."""
    with path.open() as f:
        rows = [
            (float(r["window_start_s"]), float(r["total_rate_rps"]))
            for r in csv.DictReader(f)
            if r["category_model"] == series
        ]
    return [(t, rps) for t, rps in rows if rps > 0]


def synthesize(
    shape: list[tuple[float, float]],
    lengths: list[Request],
    peak_rps: float,
    seconds_per_window: float,
    seed: int = 7,
) -> list[Request]:
    """Poisson arrivals following a rate shape scaled to ``peak_rps``, token lengths drawn from ``lengths``.

    Each ``window_seconds`` window of the shape is replayed in ``seconds_per_window`` of simulated time,
    so a multi-day shape keeps its peaks and troughs at a size a simulation can run.
    """
    rng = random.Random(seed)
    peak = max(rps for _, rps in shape)
    out: list[Request] = []
    for index, (_, rps) in enumerate(shape):
        rate = rps / peak * peak_rps
        t, end = index * seconds_per_window, (index + 1) * seconds_per_window
        while True:
            t += rng.expovariate(rate) if rate > 0 else math.inf
            if t >= end:
                break
            sample = lengths[rng.randrange(len(lengths))]
            out.append(Request(t, sample.input_tokens, sample.output_tokens))
    return out

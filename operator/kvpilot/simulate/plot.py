"""Replicas against load over time, one panel per policy (PNG; needs matplotlib)."""

from __future__ import annotations

from pathlib import Path

from kvpilot.simulate.engine import SimResult


def plot(results: dict[str, SimResult], path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("drawing needs matplotlib: pip install 'kvpilot[plot]'") from exc
    names = list(results)
    fig, axes = plt.subplots(len(names), 1, figsize=(10, 1.8 * len(names)), sharex=True)
    for ax, name in zip(axes if len(names) > 1 else [axes], names, strict=True):
        timeline = results[name].timeline
        t = [p[0] / 60 for p in timeline]
        ax.step(t, [p[1] for p in timeline], where="post", label="desired", color="tab:blue")
        ax.step(t, [p[2] for p in timeline], where="post", label="ready", color="tab:green", alpha=0.7)
        load = ax.twinx()
        load.plot(t, [p[3] for p in timeline], color="tab:gray", alpha=0.5, linewidth=0.8)
        load.set_ylabel("req/s", fontsize=7)
        ax.set_ylabel(name, fontsize=8)
    axes_list = axes if len(names) > 1 else [axes]
    axes_list[0].set_title(title)
    axes_list[0].legend(loc="upper left", fontsize=7)
    axes_list[-1].set_xlabel("minutes")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)

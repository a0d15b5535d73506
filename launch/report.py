"""Run reports: learning-curve and latency-histogram PNGs, markdown tables (matplotlib, Agg backend).

matplotlib comes with the training side ([sim]); the robot computer's [robot] install has none, so callers on the
robot side ask :func:`plotting_available` and skip their plots without it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def plotting_available() -> bool:
    """Whether matplotlib is installed, so the plot functions below can draw."""
    return importlib.util.find_spec("matplotlib") is not None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_learning_curve(steps: Sequence[int], success: Sequence[float], path: Path, title: str) -> Path:
    """Success rate (0..1) against env steps."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(list(steps), [100.0 * s for s in success], marker="o")
    ax.axhline(95.0, color="grey", linestyle="--", linewidth=1, label="95% target")
    ax.set_xlabel("env steps")
    ax.set_ylabel("deterministic success (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_latency_histogram(latencies_s: Sequence[float], path: Path, title: str) -> Path:
    """Histogram of per-tick latency in microseconds, with p50 and p99 marked."""
    plt = _pyplot()
    us = np.asarray(latencies_s, dtype=np.float64) * 1e6
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    if us.size:
        ax.hist(us, bins=60, color="#4477aa")
        for q, style in ((50, "-"), (99, "--")):
            value = float(np.percentile(us, q))
            ax.axvline(value, color="black", linestyle=style, linewidth=1, label=f"p{q} = {value:.0f} us")
        ax.legend()
    ax.set_xlabel("tick latency, state in -> command out (us)")
    ax.set_ylabel("ticks")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)

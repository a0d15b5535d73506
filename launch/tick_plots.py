"""The PNGs of ``robot-grpo report`` (matplotlib, Agg backend): positions against the box, interventions, timing,
transitions. ``launch.tick_report`` calls ``plot_all`` only where matplotlib is installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from launch.report import _pyplot, plot_latency_histogram

AXES = ("x", "y", "z")
STATE_ORDER = ("connect", "wait_fresh", "hold", "homing", "run", "safe_stop", "done")
MS = 1e3
WIDTH_IN = 10.0
DPI = 100


def plot_all(log: Any, out: Path) -> list[str]:
    """Write every plot of ``log`` (a ``tick_report.RunLog``) into ``out``; returns their file names."""
    names = [
        plot_positions(log, out / "positions.png"),
        plot_interventions(log, out / "interventions.png"),
        plot_timing(log, out / "timing.png"),
        plot_transitions(log, out / "transitions.png"),
    ]
    finite = log.latency_s[np.isfinite(log.latency_s)]
    names.append(plot_latency_histogram(finite, out / "latency.png", "control tick latency").name)
    return names


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path)
    _pyplot().close(fig)
    return path.name


def plot_positions(log: Any, path: Path) -> str:
    """Gripper position per axis vs time, with the workspace box, the goal and the checker's bound."""
    plt = _pyplot()
    fig, axes = plt.subplots(log.dims, 1, figsize=(WIDTH_IN, 2.2 * log.dims), dpi=DPI, sharex=True, squeeze=False)
    for i, ax in enumerate(axes[:, 0]):
        label = AXES[i] if i < len(AXES) else f"axis {i}"
        if np.isfinite(log.bound_low[:, i]).any():
            ax.fill_between(log.t, log.bound_low[:, i], log.bound_high[:, i], color="orange", alpha=0.3, step="post",
                            label="position bound", linewidth=0)  # fmt: skip
        ax.plot(log.t, log.position[:, i], color="#4477aa", linewidth=1, label="reported position")
        ax.plot(log.t, log.goal[:, i], color="green", linestyle="--", linewidth=1, label="goal")
        if log.box is not None:
            for edge in (log.box[0][i], log.box[1][i]):
                ax.axhline(edge, color="red", linewidth=1, label="workspace box" if edge == log.box[0][i] else None)
        ax.set_ylabel(f"{label} (m)")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[0, 0].set_title("gripper position vs the workspace box")
    axes[-1, 0].set_xlabel("time since the first tick (s)")
    return _save(fig, path)


def plot_interventions(log: Any, path: Path) -> str:
    """One row per reason, a mark at every tick it occurred."""
    plt = _pyplot()
    reasons = [reason for reason, _ in log.intervention_counts().most_common()]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 1.0 + 0.4 * max(len(reasons), 1)), dpi=DPI)
    for row, reason in enumerate(reasons):
        times = [t for t, tick_reasons in zip(log.t, log.reasons, strict=True) if reason in tick_reasons]
        ax.plot(times, [row] * len(times), "|", markersize=10, label=reason)
    ax.set_yticks(range(len(reasons)), reasons)
    ax.set_ylim(-0.5, max(len(reasons), 1) - 0.5)
    ax.set_xlim(0, max(float(log.t[-1]), 1e-3))
    ax.set_xlabel("time since the first tick (s)")
    ax.set_title("interventions" if reasons else "interventions: none")
    ax.grid(alpha=0.3, axis="x")
    return _save(fig, path)


def plot_timing(log: Any, path: Path) -> str:
    """Tick latency and wake-up jitter over time (milliseconds)."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(WIDTH_IN, 5), dpi=DPI, sharex=True)
    top.plot(log.t, log.latency_s * MS, ".", markersize=2, color="#4477aa")
    top.set_ylabel("latency (ms)")
    top.set_title("tick latency (state in -> command out) and wake-up jitter")
    bottom.plot(log.t, log.jitter_s * MS, ".", markersize=2, color="#aa7744")
    bottom.set_ylabel("jitter (ms)")
    bottom.set_xlabel("time since the first tick (s)")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_transitions(log: Any, path: Path) -> str:
    """The state machine's state over time (a step plot of the logged transitions)."""
    plt = _pyplot()
    transitions = log.transition_times()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3), dpi=DPI)
    if transitions:
        times = [0.0] + [t for t, _, _, _ in transitions]
        states = [transitions[0][1]] + [target for _, _, target, _ in transitions]
        known = [s for s in STATE_ORDER if s in states] + sorted(set(states) - set(STATE_ORDER))
        ax.step(times, [known.index(s) for s in states], where="post", color="#4477aa")
        ax.set_yticks(range(len(known)), known)
    ax.set_xlabel("time since the first tick (s)")
    ax.set_title("state machine" if transitions else "state machine: no transitions logged")
    ax.grid(alpha=0.3)
    return _save(fig, path)

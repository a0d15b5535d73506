"""Picklable schedules of training progress (SB3 convention: ``progress_remaining`` goes from 1 to 0).

``make_schedule(3e-4)`` is constant; ``make_schedule(3e-4, "linear", end=3e-5)`` decays linearly;
``make_schedule(3e-4, "cosine", end=0.0)`` follows half a cosine. Any callable schedule is accepted as is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, LinearSchedule

SCHEDULE_KINDS = ("constant", "linear", "cosine")
BOUND_CHECK_POINTS = 1001  # progress values at which a floor and a ceiling of the log-std are compared
LINEAR_PAIR = 2  # [start, end] (an optional third value is the end fraction)
Schedule = Callable[[float], float]


class CosineSchedule:
    """Half-cosine from ``start`` (progress_remaining = 1) to ``end`` (progress_remaining = 0)."""

    def __init__(self, start: float, end: float) -> None:
        self.start = float(start)
        self.end = float(end)

    def __call__(self, progress_remaining: float) -> float:
        done = min(max(1.0 - progress_remaining, 0.0), 1.0)
        return self.end + 0.5 * (self.start - self.end) * (1.0 + math.cos(math.pi * done))

    def __repr__(self) -> str:
        return f"CosineSchedule(start={self.start}, end={self.end})"


def make_schedule(value: float | Schedule, kind: str = "constant", end: float = 0.0) -> FloatSchedule:
    """Turn a float (with a ``kind``) or a callable into a float-valued schedule.

    :param value: start value, or a callable schedule (then ``kind`` and ``end`` are ignored).
    :param kind: "constant" | "linear" | "cosine".
    :param end: value at the end of training for "linear" and "cosine".
    """
    if callable(value):
        return FloatSchedule(value)
    if kind not in SCHEDULE_KINDS:
        raise ValueError(f"schedule kind must be one of {SCHEDULE_KINDS}, got {kind!r}")
    if kind == "linear":
        return FloatSchedule(LinearSchedule(float(value), float(end), 1.0))
    if kind == "cosine":
        return FloatSchedule(CosineSchedule(float(value), float(end)))
    return FloatSchedule(ConstantSchedule(float(value)))


def log_std_bound(value: float | Sequence[float] | Schedule) -> FloatSchedule:
    """A bound that may vary with training: a float (constant), ``[start, end]`` (linear over the whole of training),
    ``[start, end, end_fraction]`` (linear until ``end_fraction`` of training, then ``end``) or a schedule."""
    if isinstance(value, (list, tuple)):
        if len(value) not in (LINEAR_PAIR, LINEAR_PAIR + 1):
            raise ValueError(f"a linear schedule is [start, end] or [start, end, end_fraction], got {list(value)}")
        end_fraction = float(value[2]) if len(value) > LINEAR_PAIR else 1.0
        if not 0.0 < end_fraction <= 1.0:
            raise ValueError(
                f"end_fraction (the share of training after which the bound stays at its end) must be in (0, 1], "
                f"got {end_fraction} in {list(value)}"
            )
        return FloatSchedule(LinearSchedule(float(value[0]), float(value[1]), end_fraction))
    return make_schedule(value)


def check_log_std_bounds(floor: Schedule | None, ceiling: Schedule | None) -> None:
    """Raise ValueError when a log-std floor lies above the ceiling anywhere in training (progress 1 -> 0).

    Checked on ``BOUND_CHECK_POINTS`` evenly spaced progress values (both ends included), which catches every
    crossing of linear bounds whose end fractions are multiples of 0.001.
    """
    if floor is None or ceiling is None:
        return
    for progress in np.linspace(1.0, 0.0, BOUND_CHECK_POINTS):
        low, high = float(floor(progress)), float(ceiling(progress))
        if low > high:
            raise ValueError(
                f"min_log_std ({low:g}) lies above max_log_std ({high:g}) at training progress "
                f"{1.0 - progress:.3f}: lower min_log_std or raise max_log_std so the floor stays under the ceiling"
            )

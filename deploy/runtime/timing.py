"""Per-tick timing statistics of the control loop: latency, period jitter, wake-up lateness, overruns.

Definitions (seconds, the loop's monotonic clock):

- latency: state frame in -> command frame out. "In" is when the loop read the frame, or the start of the
  tick if the frame was already waiting (a lock-step robot answers before the next tick);
- period jitter: interval between two consecutive commands minus the period (ticks in consecutive periods only);
- wake lateness: when the loop woke for a tick minus the tick's scheduled start (scheduler jitter);
- overrun: a period that ended before its tick finished, or that the loop skipped entirely.

The last ``capacity`` samples are kept in ring buffers for percentiles (no allocation per tick); counts,
maxima and the overruns cover the whole run.
"""

from __future__ import annotations

import numpy as np

DEFAULT_CAPACITY = 1 << 16  # samples kept per statistic (about 44 minutes at 25 Hz)
PERCENTILES = (50.0, 99.0)


class RingSamples:
    """Fixed-size ring buffer of float samples with percentiles over what it holds."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1 samples, got {capacity}")
        self._buf = np.zeros(capacity, dtype=np.float64)
        self.count = 0
        self.max = float("-inf")

    def add(self, value: float) -> None:
        self._buf[self.count % self._buf.size] = value
        self.count += 1
        if value > self.max:
            self.max = value

    def values(self) -> np.ndarray:
        return self._buf[: min(self.count, self._buf.size)].copy()

    def summary(self, prefix: str) -> dict[str, float]:
        """``{prefix_p50, prefix_p99, prefix_max, prefix_n}``; NaN percentiles when empty."""
        values = self.values()
        out = {f"{prefix}_n": float(self.count)}
        for q in PERCENTILES:
            out[f"{prefix}_p{q:g}"] = float(np.percentile(values, q)) if values.size else float("nan")
        out[f"{prefix}_max"] = self.max if self.count else float("nan")
        return out


class TickStats:
    """Latency / jitter / lateness samples and overrun count of one run."""

    def __init__(self, period_s: float, capacity: int = DEFAULT_CAPACITY) -> None:
        self.period_s = period_s
        self.latency = RingSamples(capacity)
        self.jitter = RingSamples(capacity)  # |interval - period|
        self.lateness = RingSamples(capacity)
        self.overruns = 0
        self._last_command_t: float | None = None
        self._last_command_tick = -2

    def on_command(self, tick: int, t_in: float, t_out: float) -> None:
        """A policy command left at ``t_out`` for a state read at ``t_in`` (tick ``tick``)."""
        self.latency.add(t_out - t_in)
        if self._last_command_t is not None and tick == self._last_command_tick + 1:
            self.jitter.add(abs((t_out - self._last_command_t) - self.period_s))
        self._last_command_t = t_out
        self._last_command_tick = tick

    def on_wake(self, lateness_s: float) -> None:
        self.lateness.add(lateness_s)

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"period_s": self.period_s, "overruns": float(self.overruns)}
        out.update(self.latency.summary("latency_s"))
        out.update(self.jitter.summary("jitter_s"))
        out.update(self.lateness.summary("wake_late_s"))
        return out

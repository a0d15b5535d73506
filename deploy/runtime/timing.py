"""Per-tick timing statistics of the control loop: latency, period jitter, wake-up lateness, overruns.

Definitions (seconds, the loop's monotonic clock):

- latency: state frame in -> command frame out. "In" is when the loop read the frame, or the start of the
  tick if the frame was already waiting (a lock-step robot answers before the next tick);
- period jitter: interval between two consecutive commands minus the period (ticks in consecutive periods only);
- wake lateness: when the loop woke for a tick minus the tick's scheduled start (scheduler jitter);
- robot jitter: interval between two consecutive robot states (robot clock) minus the period: the part of the
  command jitter that comes from the robot, since the loop answers each state as it arrives;
- overrun: a command whose latency exceeded the period (it cannot have reached the robot's next step), or a
  period the loop skipped entirely because it was late by more than a period.

The last ``capacity`` samples are kept in ring buffers for percentiles (no allocation per tick); counts,
maxima and the overruns cover the whole run.
"""

from __future__ import annotations

import numpy as np

from deploy.wire.messages import seq_distance

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
        self.robot_jitter = RingSamples(capacity)
        self.overruns = 0
        self._last_state: tuple[int, float] | None = None
        self._last_command_t: float | None = None
        self._last_command_tick = -2

    def on_command(self, tick: int, t_in: float, t_out: float, restart: bool = False) -> None:
        """A command left at ``t_out`` for a state read at ``t_in`` (tick ``tick``). ``restart``: the first command
        of an episode, after the robot restarted its period clock at HomeMsg; its interval is not a period."""
        self.latency.add(t_out - t_in)
        if t_out - t_in > self.period_s:
            self.overruns += 1
        if not restart and self._last_command_t is not None and tick == self._last_command_tick + 1:
            self.jitter.add(abs((t_out - self._last_command_t) - self.period_s))
        self._last_command_t = t_out
        self._last_command_tick = tick

    def on_robot_state(self, seq: int, t_robot_s: float, restarted: bool = False) -> None:
        """A fresh robot state: sequence number, the robot's timestamp (its own clock, seconds), and whether the
        robot restarted its period clock with it (the first state after a HomeMsg): that interval is not counted."""
        if not restarted and self._last_state is not None and seq_distance(seq, self._last_state[0]) == 1:
            self.robot_jitter.add(abs((t_robot_s - self._last_state[1]) - self.period_s))
        self._last_state = None if restarted else (seq, t_robot_s)

    def on_wake(self, lateness_s: float) -> None:
        self.lateness.add(lateness_s)

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"period_s": self.period_s, "overruns": float(self.overruns)}
        out.update(self.latency.summary("latency_s"))
        out.update(self.jitter.summary("jitter_s"))
        out.update(self.lateness.summary("wake_late_s"))
        out.update(self.robot_jitter.summary("robot_jitter_s"))
        return out

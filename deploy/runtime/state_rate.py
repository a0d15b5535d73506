"""Does the robot step at the loop's period? The robot clock's step between consecutive states, judged over a window.

A robot spec names the robot's control period (``control_period_s``), the package was trained for it and the loop
runs at it; nothing else confirms that the robot's controller really steps at it. A robot configured for another
rate is not caught by any per-state check: at half the rate the loop never sees ``hold_ticks`` fresh states in a
row and holds for ever without saying why; at twice the rate every command is executed for two robot steps (or one
step and one hold), so the motion the policy was trained on is not the motion it gets.

Each new state (sequence number one after the previous one, as the robot numbered them) that arrives in a later loop
tick than the previous one gives one interval of the robot's own clock. Two states read in the same tick are not
paired: a lock-step robot answers every frame, so a tick that sent a HOME (or an e-stop) and a command gets two
answers a few microseconds apart, which say nothing about a period; a robot stepping faster than the loop still
shows, since every other pair of its states straddles a tick boundary. The first state after a HomeMsg is excluded
too (a robot restarts its period clock there). Once ``window`` intervals are in, their median is compared with the
loop's period: off by more than ``tolerance`` of it is a mismatch the loop cannot fix (it ends the run, naming both
rates). The median ignores single glitches: a late frame, a skipped tick, a state that carried a bad timestamp. A
robot that sends one state per message of the loop's (within ``tolerance``, over the same window) is not judged:
that is a lock-step robot, which steps once per command, so its rate is the loop's by construction and its clock
shows only how its answers were scheduled; a free-running robot at another rate sends more or fewer states than the
loop sends messages. A robot that looks slower while frames are being lost on the link is not judged either: a
lock-step robot whose commands are lost steps less often, and no count tells that apart from a slow one (a faster
one is always judged: losses only lengthen intervals).
"""

from __future__ import annotations

import math
import statistics
from collections import deque

from deploy.wire.messages import seq_distance

DEFAULT_RATE_WINDOW = 25  # intervals judged together: one second at 25 Hz
DEFAULT_RATE_TOLERANCE = 0.1  # relative error of the median interval that is still the loop's period


class StateRateCheck:
    """The robot's state period (its clock, seconds per state) against the loop's period.

    :param period_s: the loop's control period (seconds).
    :param window: consecutive-state intervals whose median is judged (a sliding window).
    :param tolerance: the median may differ from ``period_s`` by this fraction of it.
    """

    def __init__(
        self, period_s: float, window: int = DEFAULT_RATE_WINDOW, tolerance: float = DEFAULT_RATE_TOLERANCE
    ) -> None:
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0 seconds, got {period_s}")
        if window < 3:
            raise ValueError(f"window must be >= 3 intervals (a median of fewer is one glitch), got {window}")
        if not 0 < tolerance < 1:
            raise ValueError(f"tolerance must be a fraction of the period in (0, 1), got {tolerance}")
        self.period_s = float(period_s)
        self.tolerance = float(tolerance)
        self._intervals: deque[float] = deque(maxlen=window)
        self._median = math.nan  # of the intervals (seconds), kept with them
        self._last: tuple[int, float, int] | None = None  # seq, robot time (s), tick
        self._prompts: deque[int] = deque(maxlen=window + 1)  # the loop's messages sent, at each new state
        self._gaps: deque[int] = deque(maxlen=window + 1)  # frames lost from the robot so far, at each new state

    def reset(self) -> None:
        """Forget the intervals (a reopened port, a robot restart: the next robot is measured afresh)."""
        self._intervals.clear()
        self._median = math.nan
        self._prompts.clear()
        self._gaps.clear()
        self._last = None

    def add(
        self,
        seq: int,
        t_robot_s: float,
        tick: int,
        restarted: bool = False,
        prompts: int | None = None,
        frame_gaps: int = 0,
    ) -> None:
        """A new state: its sequence number, the robot's timestamp (seconds, its clock), the loop tick that read it,
        whether it is the first state after a HomeMsg (the interval ending at it is not counted), the messages the
        loop had sent when it read it (a running count; None: not known, every robot is judged) and the gaps seen so
        far in the robot's numbering (a running count of frames lost on the link)."""
        if prompts is not None:
            self._prompts.append(prompts)
        self._gaps.append(frame_gaps)
        last, self._last = self._last, (seq, t_robot_s, tick)
        if restarted or last is None or seq_distance(seq, last[0]) != 1 or tick == last[2]:
            return
        interval = t_robot_s - last[1]
        if math.isfinite(interval) and interval > 0:
            self._intervals.append(interval)
            self._median = statistics.median(self._intervals)  # only when the window changes: not every state

    @property
    def median_interval_s(self) -> float:
        """Median of the intervals in the window (seconds); NaN while it is empty."""
        return self._median

    @property
    def answers_each_message(self) -> bool:
        """Whether the robot sent one new state per message of the loop over the window (within ``tolerance``): a
        lock-step robot, whose clock follows the loop's messages (see the module docstring)."""
        sent = self._prompts[-1] - self._prompts[0] if len(self._prompts) > 1 else 0
        return sent > 0 and abs((len(self._prompts) - 1) / sent - 1.0) <= self.tolerance

    def mismatch(self) -> str:
        """ "" while the window is not full or its median is the loop's period; else what is wrong and how to fix it."""
        if len(self._intervals) < (self._intervals.maxlen or 0):
            return ""
        median = self.median_interval_s
        if abs(median - self.period_s) <= self.tolerance * self.period_s or self.answers_each_message:
            return ""
        if median > self.period_s and self._gaps and self._gaps[-1] > self._gaps[0]:
            return ""  # frames were lost: a lock-step robot whose commands were lost too steps less often, not slower
        return (
            f"the robot steps every {median:.4f} s ({1.0 / median:.1f} Hz; median of its clock over its last "
            f"{len(self._intervals)} state intervals) but the loop runs every {self.period_s:.4f} s "
            f"({1.0 / self.period_s:.1f} Hz): set the robot controller's rate to the spec's control_period_s, or "
            "re-calibrate the robot and re-export the policy for the rate it runs at"
        )

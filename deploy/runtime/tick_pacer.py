"""The control loop's deadlines: ``next_tick += period``, never ``sleep(period)`` after compute.

numpy-free, robot side. Each tick runs until its deadline; the next deadline is one period later. A tick that ends
past a later deadline skips the whole periods it missed (counted as overruns) rather than running a burst of late
ticks. Units: seconds on the loop's clock.
"""

from __future__ import annotations

from deploy.runtime.timing import TickStats


class TickPacer:
    """The current tick's deadline.

    :param period_s: the control period (seconds).
    :param stats: the loop's tick statistics (each wake-up's lateness and the periods missed are noted there).
    """

    def __init__(self, period_s: float, stats: TickStats) -> None:
        self.period_s = period_s
        self.stats = stats
        self.deadline = 0.0  # the current tick's deadline (seconds, the loop's clock)

    def start(self, now: float) -> None:
        """The first tick begins at ``now`` (seconds)."""
        self.deadline = now + self.period_s

    def wake(self, now: float) -> float:
        """A tick begins at ``now``: its lateness behind the period's start (seconds), noted in the stats."""
        lateness = now - (self.deadline - self.period_s)
        self.stats.on_wake(lateness)
        return lateness

    def advance(self, now: float) -> None:
        """The tick ended at ``now``: the next deadline, skipping whole periods already missed."""
        self.deadline += self.period_s
        behind = now - self.deadline
        if behind > 0:  # whole periods were missed: skip them rather than run a burst of late ticks
            missed = int(behind // self.period_s) + 1
            self.stats.overruns += missed
            self.deadline += missed * self.period_s

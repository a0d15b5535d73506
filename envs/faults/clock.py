"""Clock faults: the robot's stamps or numbering jump or drift (what a real controller's clock and counter do after a
brown-out, an NTP step or a crystal out of tolerance)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envs.faults.base import RobotFault

if TYPE_CHECKING:
    from envs.sim_robot import SimRobot


class ClockJump(RobotFault):
    """The robot's clock jumps by ``offset_s`` seconds (forward or back) and stays there while the fault lasts."""

    kind = "clock_jump"

    def __init__(self, offset_s: float) -> None:
        self.offset_s = float(offset_s)

    def stamp(self, t_s: float) -> float:
        return t_s + self.offset_s


class ClockDrift(RobotFault):
    """The robot's clock runs ``rate`` too fast (negative: too slow) from when the fault begins.

    :param rate: extra seconds per second (0.01: 1% fast).
    """

    kind = "clock_drift"

    def __init__(self, rate: float) -> None:
        self.rate = float(rate)
        self._origin_s: float | None = None

    def stamp(self, t_s: float) -> float:
        if self._origin_s is None:
            self._origin_s = t_s
        return t_s + self.rate * (t_s - self._origin_s)


class SequenceJump(RobotFault):
    """The robot's sequence counter jumps ahead by ``jump`` once, when the fault begins (``SimFaults.seq_jump``)."""

    kind = "sequence_jump"

    def __init__(self, jump: int) -> None:
        self.jump = int(jump)

    def begin(self, robot: SimRobot) -> None:
        robot.faults.seq_jump = self.jump

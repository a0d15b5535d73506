"""When each fault of a run is active: a list of (fault, start, duration) in robot ticks.

A robot tick is one message the robot received from the runtime (a command, a heartbeat, a HOME, an e-stop): the
runtime sends about one per control period, and in lock-step the count does not depend on wall time, so a run
replays the same faults at the same moments. Faults may overlap; each begins and ends on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envs.faults.base import RobotFault

if TYPE_CHECKING:
    from envs.sim_robot import SimRobot


@dataclass(frozen=True)
class ScheduledFault:
    """``fault`` is active from robot tick ``start`` for ``duration`` ticks."""

    fault: RobotFault
    start: int
    duration: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.duration < 1:
            raise ValueError(
                f"a fault needs start >= 0 and duration >= 1 robot ticks, got {self.start}, {self.duration}"
            )

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.fault.kind, "params": self.fault.params(), "start": self.start, "duration": self.duration}


class FaultSchedule:
    """Begins and ends the faults of one run on the robot (``SimRobot`` calls ``advance`` per message received).

    :param faults: the scheduled faults.
    """

    def __init__(self, faults: Sequence[ScheduledFault] = ()) -> None:
        self.faults = list(faults)
        self.tick = 0
        self._active: list[ScheduledFault] = []
        self._done: set[int] = set()

    def advance(self, robot: SimRobot) -> list[bytes]:
        """One robot tick: begin the faults due now, end the ones whose time is over; returns frames the ended
        faults still held (to be sent)."""
        released: list[bytes] = []
        for item in list(self._active):
            if self.tick >= item.start + item.duration:
                self._active.remove(item)
                robot.faults.models.remove(item.fault)
                released += item.fault.end(robot)
        for index, item in enumerate(self.faults):
            if index not in self._done and self.tick >= item.start:
                self._done.add(index)
                self._active.append(item)
                robot.faults.models.append(item.fault)
                item.fault.begin(robot)
        self.tick += 1
        return released

    def as_dicts(self) -> list[dict[str, Any]]:
        return [item.as_dict() for item in self.faults]

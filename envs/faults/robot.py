"""Faults of the robot's controller: reboots, e-stops ignored or raised by itself, homing that lies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deploy.wire import StateFlags
from envs.faults.base import RobotFault

if TYPE_CHECKING:
    from envs.sim_robot import SimRobot

IGNORE_ALL = 2**31  # e-stops to drop: every one while the fault lasts


class ControllerReboot(RobotFault):
    """The robot's controller reboots when the fault begins: clock and sequence start over, the arm is back home
    (``SimRobot.restart``)."""

    kind = "controller_reboot"

    def begin(self, robot: SimRobot) -> None:
        robot.restart()


class EStopIgnored(RobotFault):
    """Every e-stop from the runtime is ignored while the fault lasts (``SimFaults.drop_estops``)."""

    kind = "estop_ignored"

    def begin(self, robot: SimRobot) -> None:
        robot.faults.drop_estops = IGNORE_ALL

    def end(self, robot: SimRobot) -> list[bytes]:
        robot.faults.drop_estops = 0
        return []


class FakeHomed(RobotFault):
    """A HomeMsg is answered HOMED but the arm does not go home (it stays where it is, its delay line too)."""

    kind = "fake_homed"

    def fakes_home(self) -> bool:
        return True


class StrayHomed(RobotFault):
    """The next ``states`` states carry the HOMED flag though no homing happened."""

    kind = "stray_homed"

    def __init__(self, states: int) -> None:
        self.states = int(states)
        self._left = int(states)

    def extra_flags(self) -> int:
        if self._left <= 0:
            return 0
        self._left -= 1
        return int(StateFlags.HOMED)


class RobotEStop(RobotFault):
    """The robot's own e-stop (a button, a protective stop) while the fault lasts; released when it ends."""

    kind = "robot_estop"

    def begin(self, robot: SimRobot) -> None:
        robot.trigger_estop()

    def end(self, robot: SimRobot) -> list[bytes]:
        robot.release_estop()
        return []


class UnpromptedHome(RobotFault):
    """The robot homes by itself when the fault begins (``SimRobot.home_unprompted``)."""

    kind = "unprompted_home"

    def begin(self, robot: SimRobot) -> None:
        robot.home_unprompted()

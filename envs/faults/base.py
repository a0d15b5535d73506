"""The fault model interface: what a fault may change on the simulated robot, each hook a no-op by default.

The robot (``envs.sim_robot.SimRobot``) calls the hooks of every active fault (``SimFaults.models``) on its serving
thread: the physics stays true (``SimRobot.trace``), only what a fault touches goes wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from deploy.robot_spec import RobotSpec
    from envs.sim_robot import SimRobot


class RobotFault:
    """One fault of the simulated robot. Subclasses set ``kind`` and override the hooks they need.

    Lifecycle: ``begin(robot)`` when the schedule starts it, the hooks while it is active, ``end(robot)`` when its
    duration is over (it returns frames it still held back, which the robot then sends).
    """

    kind = "fault"

    def params(self) -> dict[str, Any]:
        """The fault's parameters (JSON-friendly), for reports and replays."""
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in vars(self).items() if k[0] != "_"}

    def describe(self) -> str:
        """``kind(param=value, ...)`` on one line."""
        inner = ", ".join(f"{k}={_short(v)}" for k, v in self.params().items())
        return f"{self.kind}({inner})"

    def within_spec(self, spec: RobotSpec, period_s: float) -> bool:
        """Whether the robot spec allows this fault (noise, latency, gain inside the calibrated range): a fault the
        spec allows must cost no safe stop. ``period_s``: the loop's period (seconds)."""
        return False

    def begin(self, robot: SimRobot) -> None:
        """The fault starts (on the serving thread)."""

    def end(self, robot: SimRobot) -> list[bytes]:
        """The fault is over; returns frames still held back (sent now)."""
        return []

    def reported_state(self, state: np.ndarray) -> np.ndarray:
        """The state vector as the robot reports it (``state``: what its sensors should read)."""
        return state

    def extra_flags(self) -> int:
        """StateFlags bits added to the next state."""
        return 0

    def stamp(self, t_s: float) -> float:
        """The robot's clock reading (seconds) as stamped on a message."""
        return t_s

    def actuation(self, action: np.ndarray) -> np.ndarray:
        """The command the motors execute (``action``: the command applied from the delay line)."""
        return action

    def accepts(self, msg: Any) -> bool:
        """Whether a message from the runtime reaches the robot (False: lost on the way in)."""
        return True

    def outgoing(self, frame: bytes) -> list[bytes]:
        """The frames the link delivers for one frame the robot sends (none: lost; two: duplicated; ...)."""
        return [frame]

    def fakes_home(self) -> bool:
        """Whether a HomeMsg is answered HOMED without the arm going home."""
        return False


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)

"""Link faults: frames lost, corrupted, late, duplicated or out of order between the robot and the runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from envs.faults.base import RobotFault

if TYPE_CHECKING:
    from deploy.robot_spec import RobotSpec
    from envs.sim_robot import SimRobot


class LinkOutage(RobotFault):
    """The cable is cut: every byte in both directions is lost (``SimFaults.link_cut``)."""

    kind = "link_outage"

    def begin(self, robot: SimRobot) -> None:
        robot.faults.link_cut = True

    def end(self, robot: SimRobot) -> list[bytes]:
        robot.faults.link_cut = False
        return []


class ByteCorruption(RobotFault):
    """Each byte, in either direction, is replaced with probability ``prob`` (``SimFaults.corrupt_prob``)."""

    kind = "byte_corruption"

    def __init__(self, prob: float) -> None:
        self.prob = float(prob)

    def begin(self, robot: SimRobot) -> None:
        robot.faults.corrupt_prob = self.prob

    def end(self, robot: SimRobot) -> list[bytes]:
        robot.faults.corrupt_prob = 0.0
        return []


class ReplyLatency(RobotFault):
    """Every frame the robot sends is held back ``periods`` control periods (``SimFaults.reply_delay_periods``).

    Within the spec while a state's age when the loop uses it (the latency plus up to one loop period of waiting
    for the next tick) stays below the watchdog's hold time: the loop need not even hold.
    """

    kind = "reply_latency"

    def __init__(self, periods: int) -> None:
        self.periods = int(periods)

    def within_spec(self, spec: RobotSpec, period_s: float) -> bool:
        return (self.periods + 1) * period_s < spec.watchdog_hold_s

    def begin(self, robot: SimRobot) -> None:
        robot.faults.reply_delay_periods = self.periods

    def end(self, robot: SimRobot) -> list[bytes]:
        robot.faults.reply_delay_periods = 0
        return []


class RandomFrameFault(RobotFault):
    """Base of the frame faults that strike each frame with a probability, from their own seeded generator."""

    def __init__(self, prob: float, seed: int) -> None:
        self.prob = float(prob)
        self.seed = int(seed)
        self._rng = np.random.default_rng(seed)

    def _strikes(self) -> bool:
        return bool(self._rng.random() < self.prob)


class DropFrames(RandomFrameFault):
    """Frames lost: each frame the robot sends, and each message it receives, is lost with probability ``prob``."""

    kind = "drop_frames"

    def accepts(self, msg: Any) -> bool:
        return not self._strikes()

    def outgoing(self, frame: bytes) -> list[bytes]:
        return [] if self._strikes() else [frame]


class DuplicateFrames(RandomFrameFault):
    """Each frame the robot sends arrives twice with probability ``prob``."""

    kind = "duplicate_frames"

    def outgoing(self, frame: bytes) -> list[bytes]:
        return [frame, frame] if self._strikes() else [frame]


class LateFrames(RandomFrameFault):
    """Each frame the robot sends is, with probability ``prob``, delivered after the next ``behind`` frames
    (``behind`` = 1: two frames swapped, reordered; more: a frame delayed past newer ones). Frames still held when
    the fault ends are delivered then.

    :param behind: how many later frames overtake a struck one.
    """

    kind = "late_frames"

    def __init__(self, prob: float, seed: int, behind: int) -> None:
        super().__init__(prob, seed)
        self.behind = int(behind)
        self._held: list[list[Any]] = []  # [frames still to overtake, frame]

    def outgoing(self, frame: bytes) -> list[bytes]:
        out = [frame]
        for entry in self._held:
            entry[0] -= 1
        out += [f for n, f in self._held if n <= 0]
        self._held = [e for e in self._held if e[0] > 0]
        if self._strikes():
            out.remove(frame)
            self._held.append([self.behind, frame])
        return out

    def end(self, robot: SimRobot) -> list[bytes]:
        frames = [f for _, f in self._held]
        self._held = []
        return frames

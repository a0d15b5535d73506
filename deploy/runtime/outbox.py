"""What the control loop sends the robot: commands, heartbeats, e-stops and HOMEs.

numpy only (robot side). Every command sent is noted where the loop keeps what it sent: the commands in flight
(``CommandLine``: history, displacement, round trips), the reckoning of a robot that reports no delay line
(``StateIntake.unreported``) and the previous command the safety filter limits the next one from
(``CommandPath.note_sent``). This part owns whether a command went out in the current tick (``commanded``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from deploy.runtime.command_line import CommandLine
from deploy.runtime.command_path import CommandPath
from deploy.runtime.robot_link import RobotLink
from deploy.runtime.state_intake import StateIntake
from deploy.wire import CommandMsg, EStopMsg, EStopReason, HeartbeatMsg, HomeMsg

ESTOP_REPEATS = "estop_repeats"  # count: e-stops repeated in SAFE_STOP until the robot acknowledges


class Outbox:
    """Sends the loop's messages and notes the commands.

    :param link: the robot's port (numbers and sends each message).
    :param clock: the loop's clock (seconds): each message's stamp.
    :param line: the commands in flight.
    :param intake: the state intake (whether the robot reports its line; the reckoning of one that does not).
    :param path: the command path (the previous command sent).
    :param counts: the loop's counters (``commands``, ``estop_repeats``).
    """

    def __init__(
        self,
        link: RobotLink,
        clock: Callable[[], float],
        line: CommandLine,
        intake: StateIntake,
        path: CommandPath,
        counts: Counter[str],
    ) -> None:
        self.link = link
        self._clock = clock
        self.line = line
        self.intake = intake
        self.path = path
        self.counts = counts
        self.commanded = False  # a command went out since the current tick began (``new_tick``)

    def new_tick(self) -> None:
        self.commanded = False

    def command(self, action: np.ndarray) -> float:
        """Send one command and note it (for the history and the barrier); returns the time after the send
        (seconds, the loop's clock)."""
        command = np.array(action, dtype=np.float64)
        seq = self.link.next_seq()
        t_sent = self._clock()
        self.link.send(CommandMsg(seq, t_sent, command))
        t_out = self._clock()
        reports_line = self.intake.reports_line
        self.line.sent(seq, command, reports_line, t_sent)
        if not reports_line:  # the robot says nothing of what it applies: reckon from what was sent
            self.intake.unreported.sent(command.tolist())
        self.path.note_sent(command)
        self.commanded = True
        self.counts["commands"] += 1
        return t_out

    def heartbeat(self) -> None:
        self.link.send(HeartbeatMsg(self.link.next_seq(), self._clock()))

    def estop(self, repeat: bool = False) -> None:
        """Send the watchdog e-stop (``repeat``: the e-stop in force, repeated until acknowledged; counted)."""
        self.link.send(EStopMsg(self.link.next_seq(), self._clock(), EStopReason.WATCHDOG))
        if repeat:
            self.counts[ESTOP_REPEATS] += 1

    def home(self, t: float, seed: int) -> None:
        """Send a HOME stamped ``t`` (seconds) for the episode of ``seed``."""
        self.link.send(HomeMsg(self.link.next_seq(), t, seed))

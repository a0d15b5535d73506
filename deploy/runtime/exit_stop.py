"""The stop at the end of a run: hold, then the e-stop repeated every period until the robot acknowledges it.

numpy only (robot side). Sent from the controller's ``finally``: it never raises on a dead link. The e-stop goes out at
most once per period on the loop's clock: other frames end a read early but not the wait, so a chatty robot is not
flooded. The acknowledgement is the stop latch's (``StopLatch``): a state flagged ESTOP_ACTIVE numbered after the
newest state seen when the stop went out.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from deploy.runtime.loop_safe_stop import ESTOP_ACTIVE
from deploy.runtime.robot_link import RobotLink
from deploy.runtime.stop_latch import StopLatch
from deploy.wire import CommandMsg, EStopMsg, EStopReason, StateMsg


class ExitStop:
    """Stops the robot at the end of a run.

    :param link: the robot's port.
    :param latch: the e-stop in force and its acknowledgement.
    :param clock: the loop's clock (seconds).
    :param period_s: the e-stop is repeated once per this many seconds.
    :param ack_timeout_s: how long the acknowledgement is waited for (seconds).
    """

    def __init__(
        self, link: RobotLink, latch: StopLatch, clock: Callable[[], float], period_s: float, ack_timeout_s: float
    ) -> None:
        self.link = link
        self.latch = latch
        self._clock = clock
        self.period_s = period_s
        self.ack_timeout_s = ack_timeout_s

    def send(self, hold: np.ndarray, newest_seq: int | None, offset_s: float) -> bool:
        """Send the hold, then the e-stop until acknowledged or ``ack_timeout_s``; whether it was acknowledged.
        ``newest_seq``: the newest state read; ``offset_s``: the checker's clock offset (seconds)."""
        link, latch = self.link, self.latch
        link.send(CommandMsg(link.next_seq(), self._clock(), hold))
        latch.engage(newest_seq, self._clock(), offset_s)
        next_estop = self._clock()
        deadline = next_estop + self.ack_timeout_s
        while not latch.acked and link.ok and self._clock() < deadline:
            link.send(EStopMsg(link.next_seq(), self._clock(), EStopReason.RUNTIME_EXIT))
            next_estop += self.period_s
            self._await_ack(min(next_estop, deadline))
        return latch.acked

    def _await_ack(self, until: float) -> None:
        """Read the link until the robot acknowledges the stop or the loop's clock reaches ``until`` (seconds)."""
        while not self.latch.acked and self.link.ok and (remaining := until - self._clock()) > 0:
            for msg in self.link.poll(remaining):
                if isinstance(msg, StateMsg) and msg.flags & ESTOP_ACTIVE:
                    self.latch.acknowledge_if(msg.seq)

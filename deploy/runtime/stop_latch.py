"""The e-stop in force and its acknowledgement.

numpy-free, robot side. After a safe stop the loop repeats the e-stop every period until the robot acknowledges it
(a state flagged ESTOP_ACTIVE, numbered after the newest state seen when the stop went out: an older one replayed or
delayed from an earlier stop says nothing of this one). A robot that keeps answering without acknowledging ends the
run (``estop_not_acknowledged``); the time it has been answering is counted from the first state received after
the stop, and anew after any silence longer than ``silence_s``: a robot cut off by a link outage has not heard the
repeated e-stops, and the states it sent before hearing one (read after the outage) are no refusal.
"""

from __future__ import annotations

from collections import Counter

from deploy.wire import seq_newer

OLD_ESTOP_ACKS = "old_estop_acks"  # count: ESTOP_ACTIVE states numbered before the stop in force (not an ack)


class StopLatch:
    """Whether the e-stop in force is acknowledged, and for how long the robot has answered without acknowledging.

    :param counts: the loop's counters (``old_estop_acks``).
    :param silence_s: a gap between states longer than this (seconds) restarts the answering clock.
    """

    def __init__(self, counts: Counter[str], silence_s: float) -> None:
        self.counts = counts
        self.silence_s = silence_s
        self.acked = True
        self._stop_seq: int | None = None  # the newest robot state seen when the e-stop in force went out
        self._answering_since: float | None = None  # first state after the stop (or after a silence), seconds
        self._last_state_t: float | None = None

    def engage(self, newest_seq: int | None, needs_ack: bool = True) -> None:
        """An e-stop goes out (``needs_ack`` False: the robot stopped by itself, nothing to acknowledge)."""
        self.acked = not needs_ack
        self._stop_seq = newest_seq
        self._answering_since = self._last_state_t = None

    def forget_numbering(self) -> None:
        """The port was reopened: the robot's numbering may have begun again, so any state reporting the e-stop
        acknowledges it."""
        self._stop_seq = None

    def answers(self, seq: int) -> bool:
        """Whether a state numbered ``seq`` and flagged ESTOP_ACTIVE acknowledges the e-stop in force."""
        if self._stop_seq is None or seq_newer(seq, self._stop_seq):
            return True
        self.counts[OLD_ESTOP_ACKS] += 1
        return False

    def acknowledge_if(self, seq: int) -> None:
        if not self.acked and self.answers(seq):
            self.acked = True

    def answering_s(self, now: float) -> float:
        """A state arrived at ``now`` (seconds) while the stop is unacknowledged: how long the robot has been
        answering since it could have heard the e-stop."""
        last = self._last_state_t
        if self._answering_since is None or (last is not None and now - last > self.silence_s):
            self._answering_since = now
        self._last_state_t = now
        return now - self._answering_since

"""The e-stop in force and its acknowledgement.

numpy-free, robot side. After a safe stop the loop repeats the e-stop every period until the robot acknowledges it
(a state flagged ESTOP_ACTIVE, numbered after the newest state seen when the stop went out: an older one replayed or
delayed from an earlier stop says nothing of this one). A robot that keeps answering without acknowledging ends the
run (``estop_not_acknowledged``); the time it has been answering is counted from the first state it made after the
stop went out (its stamp on the loop's clock, by the clock offset the checker had then), and anew after any silence
longer than ``silence_s``: states made before the robot could hear the e-stop (still in a slow link, or read after a
link outage that also swallowed the repeats) are no refusal. The offset is the lowest the latch has been given on
this link (within ``LATENCY_CREDIT_SILENCES`` times ``silence_s`` of the checker's; a higher one means the robot's
clock restarted): the checker re-learns its offset after every stop, and under a
steady reply latency it learns the latency too, so a state made before the stop would read as made after it.

A robot that restarts while the stop is unacknowledged (a controller reboot: its clock and numbering begin again, and
it is not in e-stop until it hears one again) numbers its states before the stop's, so its acknowledgement would be
taken for an old one and its states timed by a clock that no longer applies. ``restarted`` confirms such a restart on
``resync_states`` states in a row numbered at or before the stop's, each after the one before in number and stamp (a
replayed or late old state is one among the live ones, which break the chain); the caller then engages the e-stop
anew (``reengage``): acknowledged by a state numbered after the chain's, answering timed on the new clock (the
chain's fastest transit) from the moment the restart was confirmed.
"""

from __future__ import annotations

import math
from collections import Counter

from deploy.runtime.loop_config import LoopConfig
from deploy.wire import seq_newer

LATENCY_CREDIT_SILENCES = 10  # a checker's offset this many silences above the lowest: the robot's clock restarted
OLD_ESTOP_ACKS = "old_estop_acks"  # count: ESTOP_ACTIVE states numbered before the stop in force (not an ack)


class StopLatch:
    """Whether the e-stop in force is acknowledged, and for how long the robot has answered without acknowledging.

    :param counts: the loop's counters (``old_estop_acks``).
    :param silence_s: a gap between states longer than this (seconds) restarts the answering clock.
    :param resync_states: states in a row numbered at or before the stop's, consistent with each other, that confirm
        the robot restarted (``LoopConfig.resync_states``).
    """

    def __init__(self, counts: Counter[str], silence_s: float, resync_states: int = LoopConfig.resync_states) -> None:
        if resync_states < 2:
            raise ValueError(f"resync_states must be >= 2 states (one state confirms nothing), got {resync_states}")
        self.counts = counts
        self.silence_s = silence_s
        self.resync_states = resync_states
        self._chain: list[tuple[int, float, float]] = []  # states numbered at or before the stop's: seq, stamp, arrival
        self.acked = True
        self._stop_seq: int | None = None  # the newest robot state seen when the e-stop in force went out
        self._answering_since: float | None = None  # first state after the stop (or after a silence), seconds
        self._last_state_t: float | None = None
        self._stop_t = 0.0  # when the e-stop in force went out (seconds, the loop's clock)
        self._offset_s = 0.0  # the loop's clock minus the robot's, the fastest transit seen (seconds)
        self._floor_s: float | None = None  # the lowest finite offset given on this link (seconds)

    def engage(self, newest_seq: int | None, now: float, offset_s: float, needs_ack: bool = True) -> None:
        """An e-stop goes out at ``now`` (``needs_ack`` False: the robot stopped by itself, nothing to acknowledge);
        ``offset_s``: the checker's clock offset (the loop's clock minus the robot's; not finite: unknown)."""
        self.acked = not needs_ack
        self._stop_seq = newest_seq
        self._chain = []
        self._answering_since = self._last_state_t = None
        self._stop_t = now
        self._offset_s = self._lowest_offset(offset_s)

    def _lowest_offset(self, offset_s: float) -> float:
        """The offset to judge stamps by: the lowest seen on this link, unless the checker's is lower, or higher by more
        than ``LATENCY_CREDIT_SILENCES`` silences (no steady latency: the robot's clock restarted)."""
        if not math.isfinite(offset_s):
            return offset_s
        floor = self._floor_s
        if floor is None or offset_s < floor or offset_s - floor > LATENCY_CREDIT_SILENCES * self.silence_s:
            self._floor_s = floor = offset_s
        return floor

    def forget_numbering(self) -> None:
        """The port was reopened: the robot's numbering may have begun again, so any state reporting the e-stop
        acknowledges it; its clock too may have begun again."""
        self._stop_seq = None
        self._floor_s = None
        self._chain = []

    def restarted(self, seq: int, stamp_s: float, now: float) -> bool:
        """A fresh state numbered ``seq``, stamped ``stamp_s`` (the robot's clock), arrived at ``now`` (seconds) while
        the stop is unacknowledged: whether it completes ``resync_states`` states in a row numbered at or before the
        stop's, each after the one before in number and stamp (the robot restarted: module docstring)."""
        chain = self._chain
        if self.acked or self._stop_seq is None or seq_newer(seq, self._stop_seq):
            chain.clear()  # the numbering of the stop goes on (or there is none to compare with)
            return False
        if chain and not (seq_newer(seq, chain[-1][0]) and stamp_s > chain[-1][1]):
            chain.clear()
        chain.append((seq, stamp_s, now))
        return len(chain) >= self.resync_states

    def reengage(self, now: float) -> None:
        """The robot restarted (``restarted``) while the stop was unacknowledged: the e-stop goes out anew at ``now``
        (seconds), acknowledged only by a state numbered after the chain's, its answering timed on the robot's new
        clock (the chain's fastest transit)."""
        chain = self._chain
        if len(chain) < self.resync_states:
            raise RuntimeError(f"reengage needs a restart confirmed by restarted(); {len(chain)} states in the chain")
        newest_seq = chain[-1][0]
        offset_s = min(arrival - stamp for _, stamp, arrival in chain)
        self._floor_s = None  # the lowest offset belonged to the old clock
        self.engage(newest_seq, now, offset_s)

    def answers(self, seq: int) -> bool:
        """Whether a state numbered ``seq`` and flagged ESTOP_ACTIVE acknowledges the e-stop in force."""
        if self._stop_seq is None or seq_newer(seq, self._stop_seq):
            return True
        self.counts[OLD_ESTOP_ACKS] += 1
        return False

    def acknowledge_if(self, seq: int) -> None:
        if not self.acked and self.answers(seq):
            self.acked = True

    def answering_s(self, now: float, stamp_s: float) -> float:
        """A state stamped ``stamp_s`` (the robot's clock) arrived at ``now`` (seconds) while the stop is
        unacknowledged: how long the robot has been answering since it could have heard the e-stop."""
        last = self._last_state_t
        self._last_state_t = now
        made_before_stop = stamp_s + self._offset_s < self._stop_t  # False when the offset is unknown (inf)
        if made_before_stop:
            return 0.0
        if self._answering_since is None or (last is not None and now - last > self.silence_s):
            self._answering_since = now
        return now - self._answering_since

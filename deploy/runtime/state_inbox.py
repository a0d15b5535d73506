"""Which received state the loop answers next.

numpy-free, robot side. The link delivers states as they come; the loop answers one fresh state per tick (two when
the first was a HOMED one: see ``Controller``). A state that repeats the previous sequence number is a duplicate or a
frozen sender (``stale_seq``), never read; an older number (``old_seq``) is a replay or a robot that restarted (the
checker decides) and is dropped when a newer state already waits; a newer state replaces a waiting one
(``skipped_states``), except that an event state (HOMED: a moment, not a level) is answered first and the newest
state after it waits behind it, to be checked against it. Each new state also times the robot's step
(``StateRateCheck``).
"""

from __future__ import annotations

from collections import Counter

from deploy.runtime.state_rate import StateRateCheck
from deploy.wire import StateFlags, StateMsg, seq_newer

EVENT_FLAGS = int(StateFlags.HOMED)  # flags that mark a moment: such a state is never skipped for a newer one


class StateInbox:
    """The fresh state waiting to be answered, the one waiting behind an event state, and the sequence bookkeeping.

    :param counts: the loop's counters (``states``, ``stale_seq``, ``old_seq``, ``skipped_states``).
    :param period_s: the loop's control period (seconds), for the rate check.
    """

    def __init__(self, counts: Counter[str], period_s: float) -> None:
        self.counts = counts
        self.rate = StateRateCheck(period_s)
        self.last_seq: int | None = None  # the newest sequence number read
        self.repeats_since_fresh = 0  # states since the last new one that repeated its sequence number
        self._fresh: tuple[float, StateMsg] | None = None
        self._after_event: tuple[float, StateMsg] | None = None

    def put(self, msg: StateMsg, t: float) -> bool:
        """A state received at ``t`` (seconds); True when it is new (the caller times it with ``rate``)."""
        self.counts["states"] += 1
        last = self.last_seq
        if last is not None and msg.seq == last:
            self.counts["stale_seq"] += 1  # the same state again: a frozen sensor or a duplicate
            self.repeats_since_fresh += 1
            return False
        self.repeats_since_fresh = 0
        if last is not None and not seq_newer(msg.seq, last):
            self.counts["old_seq"] += 1  # a replay, or a robot that restarted: the checker decides
            if self._fresh is not None:
                return False  # a newer state is waiting: the old one cannot matter more
        self.last_seq = msg.seq
        waiting = self._fresh
        if waiting is not None and waiting[1].flags & EVENT_FLAGS and not msg.flags & EVENT_FLAGS:
            # The event state (HOMED) is answered first and becomes the anchor; the newest state after it waits and
            # is checked against it. Handing the flag on to it instead would take one glitched state, read with the
            # HOMED one, for the home pose, unchecked, and plan the episode's first command from it.
            if self._after_event is not None:
                self.counts["skipped_states"] += 1
            self._after_event = (t, msg)
            return True
        if waiting is not None:
            self.counts["skipped_states"] += 1
        self._fresh = (t, msg)
        return True

    @property
    def waiting(self) -> bool:
        return self._fresh is not None

    def take(self) -> tuple[float, StateMsg] | None:
        """The state to answer now (receive time in seconds, state); the one after an event state is next."""
        fresh, self._fresh, self._after_event = self._fresh, self._after_event, None
        return fresh

    def clear(self) -> None:
        """Drop the waiting states (read before a safe stop or a reopened port)."""
        self._fresh = self._after_event = None

"""How many of the last states the loop had to reject: the stop for a robot that is wrong often, not in a row.

numpy-free, robot side. ``max_implausible_states`` stops the loop after that many rejected states in a row; a robot
that is wrong on every other state (a sensor that glitches every few reads, firmware that pops its delay line one
state late, so that every second line looks like a lost command and the next one contradicts it) never reaches it
and runs with half its ticks held, each one counted and none stopping it. ``RejectionWindow`` keeps the verdicts of
the last ``size`` states received where a bad state costs a held tick (HOLD, HOMING, RUN) and says when
``max_rejected`` of them were rejected. O(1) per state: a ring of the last verdicts and a running count.
"""

from __future__ import annotations

from collections import Counter, deque

ACCEPTED: str = ""  # the ring's entry of an accepted state (a rejected one holds its reason)


class RejectionWindow:
    """The last ``size`` verdicts (control steps with a state); ``record`` says when ``max_rejected`` were rejects.

    :param size: states remembered (control steps that brought a state, or a malformed frame, in a checked mode).
    :param max_rejected: rejected states among the last ``size`` that call for a safe stop (1..size).
    """

    def __init__(self, size: int, max_rejected: int) -> None:
        if size < 1:
            raise ValueError(f"rejection_window_states must be >= 1 (states), got {size}")
        if not 1 <= max_rejected <= size:
            why = (
                "more rejections than the window holds could never stop the loop"
                if max_rejected > size
                else "0 would stop at the first rejected state (max_implausible_states=1 does that)"
            )
            raise ValueError(
                f"max_rejected_in_window must be in 1..rejection_window_states ({size}), got {max_rejected}: {why}"
            )
        self.size = size
        self.max_rejected = max_rejected
        self._verdicts: deque[str] = deque(maxlen=size)
        self.rejected = 0  # rejected states in the window

    def record(self, reason: str = ACCEPTED) -> bool:
        """Add one state's verdict (``reason``: why it was rejected; empty: accepted); True when the window now holds
        ``max_rejected`` rejected states."""
        if len(self._verdicts) == self.size and self._verdicts[0] != ACCEPTED:
            self.rejected -= 1  # the oldest verdict leaves the ring
        self._verdicts.append(reason)
        if reason != ACCEPTED:
            self.rejected += 1
        return self.rejected >= self.max_rejected

    def reset(self) -> None:
        """Forget every verdict (after a safe stop: the robot is re-homed and judged afresh)."""
        self._verdicts.clear()
        self.rejected = 0

    def summary(self) -> str:
        """'N of the last M states were rejected (reason: count, ...)', the most frequent reason first."""
        reasons = Counter(v for v in self._verdicts if v != ACCEPTED)
        listed = ", ".join(f"{reason}: {count}" for reason, count in reasons.most_common())
        return f"{self.rejected} of the last {len(self._verdicts)} states were rejected ({listed})"

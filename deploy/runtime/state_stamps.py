"""A state as the state checker remembers it, and the checks of its stamp and sequence number against an earlier one.

numpy-free, robot side. ``StampCheck`` judges time and numbering only (``state_check.StateChecker`` judges values and
motion, and keeps the clock offset): the robot's clock must move forward, must not run ahead of the local clock by
more than the tolerance once the offset is taken out, and the sequence number must move forward by no more messages
than the elapsed time and the loop's own messages explain. Units: seconds, messages.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from deploy.wire import seq_distance, seq_newer

# Kinds of implausible state this part finds (the tick log records ``implausible_<kind>``).
TIME_BACKWARDS = "time_backwards"
TIME_AHEAD = "time_ahead"
SEQ_GAP = "seq_gap"
SEQ_BACKWARDS = "seq_backwards"
MSGS_PER_STEP = 2  # messages a robot may number per control step or per message it answers (a state + an error)


@dataclass
class Seen:
    """A state as the checker remembers it."""

    seq: int
    t_robot: float  # the robot's stamp (seconds, its clock)
    t_recv: float  # when it was received (seconds, the local clock)
    position: list[float]  # metres
    pending: tuple[int, ...]
    motion: list[float]  # position change from the state before it (metres)
    prompts: int  # messages the loop had sent when it checked this state
    reach: float = 0.0  # metres the applied commands allowed (Euclidean, at the gain bound), without carry


class StampCheck:
    """Time and sequence checks of one state against an earlier one.

    :param loop_period_s: the control loop's period (seconds): sequence gaps are judged per period.
    :param robot_period_s: the robot's control step (seconds, the spec's): a lock-step robot steps one per message.
    :param clock_tolerance_s: how far (seconds) a stamp may run ahead of the local clock, once the offset is out.
    :param seq_gap_slack: messages beyond the elapsed time's share a state may skip.
    """

    def __init__(
        self, loop_period_s: float, robot_period_s: float, clock_tolerance_s: float, seq_gap_slack: int
    ) -> None:
        self.loop_period_s = loop_period_s
        self.robot_period_s = robot_period_s
        self.clock_tolerance_s = clock_tolerance_s
        self.seq_gap_slack = seq_gap_slack

    def kind(self, seen: Seen, anchor: Seen, offset_s: float) -> str:
        """The time/sequence fault of ``seen`` relative to ``anchor`` ("" if none); ``offset_s``: local minus robot
        time of the fastest accepted transit (seconds)."""
        if not seq_newer(seen.seq, anchor.seq):
            return SEQ_BACKWARDS
        if not seen.t_robot > anchor.t_robot:
            return TIME_BACKWARDS
        if seen.t_robot + offset_s > seen.t_recv + self.clock_tolerance_s:
            return TIME_AHEAD
        if self.seq_gap(anchor, seen):
            return SEQ_GAP
        return ""

    def seq_gap(self, older: Seen, newer: Seen) -> bool:
        """More messages numbered between two states than the elapsed time and the loop's messages explain."""
        elapsed = max(newer.t_robot - older.t_robot, newer.t_recv - older.t_recv)
        steps = math.ceil(elapsed / self.loop_period_s) + max(0, newer.prompts - older.prompts)
        return seq_distance(newer.seq, older.seq) > self.seq_gap_slack + MSGS_PER_STEP * steps

    def elapsed_s(self, seen: Seen, anchor: Seen) -> float:
        """An upper bound of the physical time between two states (seconds): robot clock, or one control period per
        message (a lock-step robot steps a whole period per command, whatever its clock says)."""
        messages = seq_distance(seen.seq, anchor.seq)
        return max(seen.t_robot - anchor.t_robot, messages * self.robot_period_s)


RESTART_KINDS = frozenset({TIME_BACKWARDS, TIME_AHEAD, SEQ_GAP, SEQ_BACKWARDS})  # breaks a robot restart explains


class RestartChain:
    """Rejected states in a row that are consistent with each other: a candidate for a robot restart (its clock and
    counter began again) or for a clock offset that was overestimated.

    :param resync_states: consistent rejected states in a row that confirm a restart (>= 2).
    :param consistent: whether two rejected states (older, newer) could come from one running robot.
    """

    def __init__(self, resync_states: int, consistent: Callable[[Seen, Seen], bool]) -> None:
        self.resync_states = resync_states
        self._consistent = consistent
        self.states: list[Seen] = []  # oldest first
        self.kind = ""  # why the chain's first state was rejected

    def clear(self) -> None:
        self.states = []

    def add(self, seen: Seen, kind: str) -> bool:
        """Add a state rejected for ``kind``, after the chain or beginning a new one; True when the chain now
        confirms a restart (``resync_states`` long, begun by a break a restart explains)."""
        chain = self.states
        if chain and not self._consistent(chain[-1], seen):
            chain.clear()
        if not chain:
            self.kind = kind
        chain.append(seen)
        return len(chain) >= self.resync_states and self.kind in RESTART_KINDS

    def only_ahead(self, seen: Seen) -> bool:
        """``seen`` completes a chain of states that are all only "ahead" and consistent with each other."""
        chain = self.states
        return (
            self.kind == TIME_AHEAD
            and len(chain) + 1 >= self.resync_states
            and bool(chain)
            and self._consistent(chain[-1], seen)
        )

    def fastest_transit_s(self, seen: Seen | None = None) -> float:
        """The shortest local-minus-robot time of the chain's states (and ``seen``), seconds."""
        extra = () if seen is None else (seen,)
        return min(s.t_recv - s.t_robot for s in (*self.states, *extra))

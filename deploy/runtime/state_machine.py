"""The control loop's operating states and the transitions allowed between them.

    CONNECT -> WAIT_FRESH -> HOLD -> HOMING -> RUN [-> RETRACT] -> HOMING -> RUN ... -> DONE
                   ^          ^                       |
                   |          +-----------------------+   (HOMING, RUN or RETRACT -> HOLD: the robot restarted)
                   +---------- SAFE_STOP <------------+   (from WAIT_FRESH, HOLD, HOMING, RUN or RETRACT)

- CONNECT: open the port.
- WAIT_FRESH: send heartbeats until a fresh (newer sequence number), finite state arrives.
- HOLD: command the hold (zero displacement) until ``hold_ticks`` fresh states in a row have arrived.
- HOMING: a HomeMsg was sent; wait for the robot's first state of the new episode (flag HOMED).
- RUN: one policy command per fresh state, through the safety filter.
- RETRACT (a cell arm, after an episode): one command toward home per fresh state, through the safety filter and the
  separation barrier, until near home; then HOMING (or HOLD while the partner is stale or not done).
- SAFE_STOP: hold + e-stop sent, the e-stop repeated every period until the robot acknowledges it; then, when the
  robot answers again, WAIT_FRESH (or the run ends).
- DONE: the run is over; the stop command goes out in ``finally``.

Any state may go to DONE (goals exhausted, tick limit, an exception). Every transition is recorded with the
tick and the reason, so a log shows why the loop did what it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class LoopState(Enum):
    CONNECT = "connect"
    WAIT_FRESH = "wait_fresh"
    HOLD = "hold"
    HOMING = "homing"
    RUN = "run"
    RETRACT = "retract"
    SAFE_STOP = "safe_stop"
    DONE = "done"


ALLOWED: dict[LoopState, frozenset[LoopState]] = {
    LoopState.CONNECT: frozenset({LoopState.WAIT_FRESH}),
    LoopState.WAIT_FRESH: frozenset({LoopState.HOLD, LoopState.SAFE_STOP}),
    LoopState.HOLD: frozenset({LoopState.HOMING, LoopState.SAFE_STOP}),
    LoopState.HOMING: frozenset({LoopState.RUN, LoopState.HOLD, LoopState.SAFE_STOP}),
    LoopState.RUN: frozenset({LoopState.HOMING, LoopState.HOLD, LoopState.SAFE_STOP, LoopState.RETRACT}),
    LoopState.RETRACT: frozenset({LoopState.HOMING, LoopState.HOLD, LoopState.SAFE_STOP}),
    LoopState.SAFE_STOP: frozenset({LoopState.WAIT_FRESH}),
    LoopState.DONE: frozenset(),
}


class TransitionError(RuntimeError):
    """A transition the state machine does not allow (a bug in the loop, not a robot fault)."""


@dataclass(frozen=True)
class Transition:
    """One state change: at ``tick``, ``source`` -> ``target`` because of ``reason``."""

    tick: int
    source: LoopState
    target: LoopState
    reason: str


class StateMachine:
    """Holds the current ``LoopState`` and checks every transition against ``ALLOWED``."""

    def __init__(self) -> None:
        self.state = LoopState.CONNECT
        self.history: list[Transition] = []

    def to(self, target: LoopState, tick: int, reason: str) -> None:
        """Move to ``target``; DONE is reachable from anywhere, the rest only as ``ALLOWED`` says."""
        if target is not LoopState.DONE and target not in ALLOWED[self.state]:
            raise TransitionError(f"transition {self.state.value} -> {target.value} is not allowed ({reason})")
        if target is self.state:
            return
        self.history.append(Transition(tick, self.state, target, reason))
        self.state = target

    def entered(self, state: LoopState) -> int:
        """How many times ``state`` was entered."""
        return sum(1 for t in self.history if t.target is state)

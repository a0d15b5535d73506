"""Does the arm follow its commands, on a robot that reports no delay line? The windowed stand-in for the state
checker's ``not_following``, which needs the line to know which commands were applied.

numpy-free, robot side. A robot that sends m = 0 (PROTOCOL.md) says nothing of which commands it applied, so the
loop can only reckon from the spec: a command is applied ``delay`` control steps after it was sent, ``delay`` in the
spec's range, and a state may be a step early or late (a free-running robot's step and the loop's tick are not
aligned). Between two accepted states, made when ``c_j`` and ``c_n`` commands had been sent (numbered 1, 2, ... in
sending order), the commands numbered in (c_j - low + 1, c_n - high - 1] were then certainly applied, and those
within one step of either end perhaps. The arm must have moved along the certain ones' net move by at least
``FOLLOW_FRACTION`` of it (the line check's share), less what the edge commands may have moved it against that
direction, ``REVERSAL_SLACK`` of the certain commands' path beyond their net move (the arm lags each reversal), half
the motion it carried into the window (in any direction: the arm settling after a large command) and the noise;
below ``MIN_UNREPORTED_FOLLOW_M`` of certain net command nothing is judged. Every earlier state of the last
``WINDOW_STATES`` is judged against the newest, so a sensor that froze is caught once three commands are certainly
applied since its last true reading (measured: the arm goes 5 steps, 17 cm, past it, where it drove 0.72 m blind
before this check; see ``tests/deploy/runtime/test_untrusted_states.py``). A command lost on the link (unknown
without a line) would look like one the arm did not follow: a link that loses commands is stopped too.
"""

from __future__ import annotations

import math
from collections import deque

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec
from deploy.runtime.state_check import CARRY_FRACTION, falls_short, net_move

WINDOW_STATES = 8  # accepted states kept: the newest is judged against each of the others
# Metres of certain net command below which following is not judged: twice the line check's MIN_FOLLOW_M, since
# without a line small commands are not told from the arm settling after a large one (a P controller near its goal
# moved 3 mm against 1 cm of commands). A sensor frozen while the policy drives on is far above it (3.3 cm a step).
MIN_UNREPORTED_FOLLOW_M = 0.02
ALIGNMENT_STEPS = 1  # a state may be made this many control steps before or after the spec's delay says


class UnreportedFollowing:
    """The commands sent and the last accepted states of a robot that reports no delay line (module docstring).

    :param spec: the robot spec (delay range, per-axis nominal gain, command scale).
    :param contract: the policy's contract (how many action components are a Cartesian move).
    :param noise_m: the allowance for a projection of the difference of two noisy positions (metres).
    """

    def __init__(self, spec: RobotSpec, contract: ObservationContract, noise_m: float) -> None:
        self._dims = contract.goal_dim
        self._m_per_unit = [spec.command_scale_m * g for g in spec.actuator_gain]
        low, high = spec.delay_range
        self._after_start = ALIGNMENT_STEPS - low  # certain: numbered above c_j + this ...
        self._before_end = high + ALIGNMENT_STEPS  # ... and at most c_n - this
        self._edge = high - low + 2 * ALIGNMENT_STEPS  # commands perhaps applied, next to either end
        self._void_through = 0  # commands numbered up to this were sent before the last reset: never judged
        self._taken_through = 0  # commands numbered up to this were handed out by ``newly_certain`` (or skipped)
        self._noise_m = noise_m
        self._moves: deque[list[float]] = deque(maxlen=WINDOW_STATES + high + 2 * ALIGNMENT_STEPS + 2)
        self._sent = 0  # commands sent so far; the newest in _moves is number _sent
        self._states: deque[tuple[list[float], int]] = deque(maxlen=WINDOW_STATES)  # (position m, commands sent)

    def sent(self, command: list[float]) -> None:
        """A command went out (command units): remember its move at the nominal gain (metres, per axis)."""
        self._moves.append([u * k for u, k in zip(command[: self._dims], self._m_per_unit, strict=True)])
        self._sent += 1

    def reset(self) -> None:
        """Forget the states and void the commands sent so far (a HOME, a HOMED state, a safe stop, a restart, a
        reconnect): the arm moved by itself since, and the robot dropped the commands it had not applied."""
        self._states.clear()
        self._void_through = self._sent

    def newly_certain(self) -> list[list[float]]:
        """The moves (metres at nominal gain, per axis, oldest first) of the commands that became certainly applied
        since the last call: numbered up to ``sent - high - ALIGNMENT_STEPS``, after the last reset and the last
        reference (``mark_reference``). Commands no longer remembered are left out."""
        last = self._sent - self._before_end
        first = max(self._taken_through, self._void_through) + 1
        self._taken_through = max(self._taken_through, last)
        moves = (self._move(number) for number in range(first, last + 1))
        return [move for move in moves if move is not None]

    def mark_reference(self) -> None:
        """A state taken now is a new motion reference: commands that may have been applied before it was made
        (numbered up to ``sent - low + ALIGNMENT_STEPS``) are never counted as applied after it."""
        self._taken_through = max(self._taken_through, self._sent + self._after_start)

    def not_following(self, position: list[float]) -> bool:
        """Add an accepted state (its position, metres) made after ``sent`` commands; True when, judged against an
        earlier state of the window, the arm did not follow the commands certainly applied in between."""
        states = self._states
        newest = self._sent
        judged = False
        previous: list[float] | None = None
        for position_j, sent_j in states:
            if previous is not None and self._short(position, position_j, previous, sent_j, newest):
                judged = True
                break
            previous = position_j
        states.append((position, newest))
        return judged

    def _move(self, number: int) -> list[float] | None:
        """The move of command ``number`` (1 = the first sent), None if no longer remembered (or never sent)."""
        age = self._sent - number
        return self._moves[-1 - age] if 0 <= age < len(self._moves) else None

    def _short(self, position: list[float], start: list[float], before: list[float], sent_j: int, sent_n: int) -> bool:
        """Judge the newest state (``position``, made after ``sent_n`` commands) against an earlier one (``start``,
        after ``sent_j``; ``before``: the state ahead of it, for the motion carried into the window)."""
        first, last = max(sent_j + self._after_start + 1, self._void_through + 1), sent_n - self._before_end
        if last < first:
            return False
        certain = [self._move(n) for n in range(first, last + 1)]
        if any(m is None for m in certain):
            return False
        net, length, path = net_move(certain)  # type: ignore[arg-type]
        if length < MIN_UNREPORTED_FOLLOW_M:
            return False
        edges = [
            *range(max(first - self._edge, self._void_through + 1), first),
            *range(last + 1, last + 1 + self._edge),
        ]
        against = 0.0  # what the commands perhaps applied at either end may have moved the arm against the net move
        for number in edges:
            move = self._move(number)
            if move is not None:
                against += max(0.0, -sum(m * e for m, e in zip(move, net, strict=True)) / length)
        motion = [p - s for p, s in zip(position, start, strict=True)]
        carried = math.dist(start, before)  # any direction: without a line the arm's own settling is not known
        return falls_short(motion, net, length, path, against + CARRY_FRACTION * carried + self._noise_m)

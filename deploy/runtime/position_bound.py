"""Where the gripper can be: a bound that silence cannot shrink.

numpy-free, robot side. The workspace barrier plans from a per-axis bound ``[low, high]`` (metres) that must contain
the true gripper whatever the robot reports, under the spec's gain range, noise and the commands applied. A state
that passes every check can still lie by omission: a position sensor that froze reports the arm where it was, and a
dead motor reports an arm that honestly stands still while the loop commands it on. Neither is caught state by
state when the commands are small (a 1 cm dead band per state hid a policy commanding 0.3 units: the arm drove 12 cm
past a face). So the bound keeps a *reference*: the last state whose motion was confirmed, with its own bound. From
it, it reckons where the commands applied since can have taken the arm (dead reckoning):

    S_k   = the sum of the first k commands possibly applied since the reference (metres at command scale)
    reach = per axis, the hull of gain_max x S_k over k (the arm lags, so it may be anywhere the partial sums went),
            widened by ``COUPLING_SHARE`` of the farthest |S_k| (a command on one axis moves the arm a little on the
            others; commands that reverse each other do not take it far, whatever their path)
    bound = the state's own bound (``StateChecker``'s verdict) together with the reference's bound moved by reach

A state never shrinks the bound below the reckoning until it *confirms* the motion: the measured motion since the
reference goes at least ``CONFIRM_SHARE`` of the certain net move along it (beyond the noise), with at least
``MIN_CONFIRM_M`` of certain net move (no dead band per state: the sum runs over as many states as it takes). Then
that state is the new reference. The certain net move sums the commands of at least ``STICTION_M`` each: an arm
does not move for smaller ones (the simulated Fetch held still under 0.5 mm a step for 20 steps, as a real arm's
static friction holds it), so they can neither confirm nor refute the sensor; the reckoning, and so the barrier,
still counts every command. Otherwise, from the same sums:

- **not following**: the measured motion since the reference falls short of the certain net move as the line check
  judges a state pair (``state_check.falls_short``: 1% of it, for the short windows where the arm lags a reversal),
  or, over a longer window, goes less than ``LONG_FOLLOW_SHARE`` of it beyond ``LAG_STEPS`` of the newest certain
  moves (an honest arm follows most of a long move; 4 mm moved before a sensor froze passed the 1% rule for 10 cm of
  commands),
  allowing half the motion the arm made by itself at each state since the reference (it settles and sags after a
  fast move; a frozen sensor or a stalled motor shows none) -> ``NOT_FOLLOWING``;
- **beside the commands**: the measured position lies outside the reckoning on an axis by more than the motion
  margin, the noise, what the arm carried at the reference and half its own motion since: a reading that jumped
  against the commanded motion (a sensor offset that would let the barrier plan from a place further from a face
  than the arm can be) -> ``BESIDE_COMMANDS``, a rejected state (held; five in a row stop the robot);
- **unconfirmed too long**: the reckoning spans ``max_unconfirmed_m`` on an axis (commands that reverse each other
  keep the net move small while the arm may still wander) -> ``MOTION_UNCONFIRMED``.

Both end in a safe stop with their named reason (the loop's ``implausible_<kind>``). A reference is taken without
confirmation only where the arm's place is known otherwise: the first state, a HOMED state at the spec's home, the
first state after a confirmed restart (``anchor``).
"""

from __future__ import annotations

import math

from deploy.runtime.axis_reckoning import AxisReckoning
from deploy.runtime.state_check import CARRY_FRACTION, MIN_FOLLOW_M, MOTION_MARGIN_M, NOT_FOLLOWING, falls_short

BESIDE_COMMANDS = "beside_commands"  # the reading lies outside where the commands since the reference can have taken it
MOTION_UNCONFIRMED = "motion_unconfirmed"  # the reckoning spanned max_unconfirmed_m with no state confirming it
CONFIRM_SHARE = 0.5  # share of the certain net move the measured motion must go along it to confirm the sensor
MIN_CONFIRM_M = MIN_FOLLOW_M  # metres of certain net move below which no state confirms anything (noise, settling)
LAG_STEPS = 2  # the arm may lag the certain moves by this many of the newest of them
LONG_FOLLOW_SHARE = 0.25  # share of a long certain move (beyond one step of lag) an honest arm always goes along it
STICTION_M = 0.002  # metres: certain moves shorter than this (at nominal gain) judge nothing (static friction)
COUPLING_SHARE = 0.1  # share of the commanded path an axis may move that no command on it asked for (kinematics)
DEFAULT_MAX_UNCONFIRMED_M = 0.1  # metres the reckoning may span on an axis between confirmations


class PositionBound:
    """The gripper's position bound and the motion reference behind it (module docstring).

    :param dims: Cartesian axes (the box's dimensions).
    :param gain_max: the spec's actuator gain upper bound (metres moved per metre commanded).
    :param noise_m: allowance for the projection of the difference of two noisy positions (metres):
        ``StateChecker.follow_noise_m``.
    :param unknown_move_m: per axis, the largest move of a command no longer remembered (metres at command scale).
    :param max_unconfirmed_m: metres the reckoning may span on an axis before ``MOTION_UNCONFIRMED``.
    """

    def __init__(
        self,
        dims: int,
        gain_max: float,
        noise_m: float,
        unknown_move_m: float,
        max_unconfirmed_m: float = DEFAULT_MAX_UNCONFIRMED_M,
    ) -> None:
        if not max_unconfirmed_m > 0:
            raise ValueError(f"max_unconfirmed_m must be > 0 metres, got {max_unconfirmed_m}")
        self._dims = dims
        self._gain_max = gain_max
        self._noise_m = noise_m
        self._unknown_move_m = unknown_move_m
        self.max_unconfirmed_m = max_unconfirmed_m
        self.low: tuple[float, ...] | None = None  # metres, per axis; None before the first state
        self.high: tuple[float, ...] | None = None
        self.confirmed = False  # the newest state confirmed the motion since its reference
        self._axes = [
            AxisReckoning(a, dims, gain_max, noise_m, unknown_move_m, MIN_CONFIRM_M, STICTION_M) for a in range(dims)
        ]
        self._new_reference([0.0] * dims, (0.0,) * dims, (0.0,) * dims, ())

    def reset(self) -> None:
        """Forget the bound (a reconnect, a safe stop): the next state is taken as a reference."""
        self.low = self.high = None

    @property
    def span_m(self) -> float:
        """How wide the reckoning since the reference is on its widest axis (metres)."""
        return max(hi - lo for lo, hi in zip(self._reach_low, self._reach_high, strict=True))

    def anchor(self, position: list[float], low: tuple[float, ...], high: tuple[float, ...]) -> None:
        """A state whose place is known otherwise (the first, HOMED at the spec's home, after a restart): its own
        bound (metres) and a fresh reference."""
        self.low, self.high = tuple(low), tuple(high)
        self.confirmed = False
        self._new_reference(position, low, high, ())
        for axis in self._axes:
            axis.anchor(position[axis.axis], low[axis.axis], high[axis.axis])

    def update(
        self,
        position: list[float],
        low: tuple[float, ...],
        high: tuple[float, ...],
        applied_m: list[tuple[int, list[float] | None]],
        certain_m: list[list[float]] | None,
        motion_m: tuple[float, ...],
    ) -> str:
        """An accepted state: fold it into the bound; returns "" or the fault it shows (``NOT_FOLLOWING``,
        ``MOTION_UNCONFIRMED``).

        :param position: the measured gripper position (metres).
        :param low: the state's own lower bound (metres per axis; the checker's verdict).
        :param high: its upper bound.
        :param applied_m: the commands possibly applied since the previous state, oldest first: (sequence number,
            move in metres at command scale per axis; None: a command no longer remembered, any move up to
            ``unknown_move_m`` per axis). A number already counted since the reference is not counted again.
        :param certain_m: the moves (metres at nominal gain) of the commands certainly applied since the previous
            state; None when nothing is certain (such a state confirms nothing).
        :param motion_m: the measured motion since the previous state (metres).
        """
        if self.low is None or self.high is None:
            self.anchor(position, low, high)
            return ""
        self._reckon(applied_m)
        for axis in self._axes:
            axis.reckon(applied_m)
        coupling = COUPLING_SHARE * self._gain_max * self._farthest_m
        reckoned_low = [r + d - coupling for r, d in zip(self._ref_low, self._reach_low, strict=True)]
        reckoned_high = [r + d + coupling for r, d in zip(self._ref_high, self._reach_high, strict=True)]
        margin = MOTION_MARGIN_M + self._noise_m + CARRY_FRACTION * math.hypot(*self._carried_m) + self._settle_m
        if any(
            p < lo - margin or p > hi + margin for p, lo, hi in zip(position, reckoned_low, reckoned_high, strict=True)
        ):
            return BESIDE_COMMANDS
        for move in certain_m or ():
            if math.hypot(*move) < STICTION_M:
                continue
            self._net = [n + m for n, m in zip(self._net, move, strict=True)]
            self._path_m += math.hypot(*move)
            self._recent_m = [*self._recent_m[1 - LAG_STEPS :], math.hypot(*move)] if LAG_STEPS > 1 else []
        measured = [p - r for p, r in zip(position, self._ref, strict=True)]
        net_m = math.hypot(*self._net)
        along = sum(m * n for m, n in zip(measured, self._net, strict=True)) / net_m if net_m > 0 else 0.0
        self.confirmed = net_m >= MIN_CONFIRM_M and along >= CONFIRM_SHARE * net_m + self._noise_m
        self._bound_axes(position, low, high, None if self.confirmed else (reckoned_low, reckoned_high), certain_m)
        if self.confirmed:
            self._new_reference(position, low, high, motion_m)
            return ""
        if net_m >= MIN_FOLLOW_M:
            carried_against = max(0.0, -sum(c * n for c, n in zip(self._carried_m, self._net, strict=True)) / net_m)
            slack = CARRY_FRACTION * carried_against + self._settle_m + self._noise_m
            lags_far = along < LONG_FOLLOW_SHARE * (net_m - sum(self._recent_m)) - slack
            if lags_far or falls_short(measured, self._net, net_m, self._path_m, slack):
                return NOT_FOLLOWING
        if self.span_m >= self.max_unconfirmed_m:
            return MOTION_UNCONFIRMED
        self._settle_m += CARRY_FRACTION * math.hypot(*motion_m) if motion_m else 0.0
        return ""

    def _bound_axes(
        self,
        position: list[float],
        low: tuple[float, ...],
        high: tuple[float, ...],
        reckoned: tuple[list[float], list[float]] | None,
        certain_m: list[list[float]] | None,
    ) -> None:
        """The bound, axis by axis: the state's own interval on an axis that confirms the motion on it (and takes
        the reading as its new reference); elsewhere that interval together with the axis's reckoning and, while
        the motion as a whole is unconfirmed, the whole motion's reckoning (``reckoned``)."""
        new_low, new_high = list(low), list(high)
        for axis in self._axes:
            a = axis.axis
            axis.add_certain(certain_m)
            if axis.confirms(position[a]):
                axis.anchor(position[a], low[a], high[a])
                continue
            lo, hi = axis.interval()
            if reckoned is not None:
                lo, hi = min(lo, reckoned[0][a]), max(hi, reckoned[1][a])
            new_low[a], new_high[a] = min(low[a], lo), max(high[a], hi)
        self.low, self.high = tuple(new_low), tuple(new_high)

    def _reckon(self, applied_m: list[tuple[int, list[float] | None]]) -> None:
        """Advance the partial sums by the commands possibly applied and widen their hull (at the gain bound)."""
        gain = self._gain_max
        for seq, move in applied_m:
            if seq in self._counted:
                continue
            self._counted.add(seq)
            if move is None:  # any move: both ways on every axis
                step = [self._unknown_move_m] * self._dims
                self._reach_low = [lo - gain * s for lo, s in zip(self._reach_low, step, strict=True)]
                self._reach_high = [hi + gain * s for hi, s in zip(self._reach_high, step, strict=True)]
                self._farthest_m += math.hypot(*step)
                continue
            self._sum = [t + m for t, m in zip(self._sum, move, strict=True)]
            self._reach_low = [min(lo, gain * t) for lo, t in zip(self._reach_low, self._sum, strict=True)]
            self._reach_high = [max(hi, gain * t) for hi, t in zip(self._reach_high, self._sum, strict=True)]
            self._farthest_m = max(self._farthest_m, math.hypot(*self._sum))

    def _new_reference(
        self, position: list[float], low: tuple[float, ...], high: tuple[float, ...], motion_m: tuple[float, ...]
    ) -> None:
        dims = self._dims
        self._ref = list(position)
        self._ref_low, self._ref_high = list(low), list(high)
        self._carried_m = list(motion_m) if motion_m else [0.0] * dims  # the motion the arm had at the reference
        self._sum = [0.0] * dims  # commands possibly applied since the reference (metres at command scale)
        self._counted: set[int] = set()  # their sequence numbers
        self._reach_low = [0.0] * dims  # hull of gain_max x the partial sums, per axis (metres)
        self._reach_high = [0.0] * dims
        self._farthest_m = 0.0  # the largest |S_k| so far (metres at command scale; a forgotten command adds its most)
        self._net = [0.0] * dims  # certain net move since the reference (metres, nominal gain)
        self._path_m = 0.0  # summed lengths of the certain moves (metres)
        self._recent_m: list[float] = []  # lengths of the newest LAG_STEPS certain moves (metres)
        self._settle_m = 0.0  # half the arm's own motion summed over the states since the reference (metres)

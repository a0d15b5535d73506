"""Where one axis of the gripper can be, reckoned from that axis's own last confirmed reading.

numpy-free, robot side. ``PositionBound`` judges the motion as a whole: a state confirms when its measured motion
goes far enough along the commanded net move. That projection is blind to what happens on one axis: a 4.8 cm
sensor offset in z passed while x and y moved as commanded (the barrier then planned z 4.8 cm too high and let the
arm 2.5 mm through the floor), and a sensor that reports 55% of every motion confirmed each state (0.55 >= 0.5) while
the arm drove 5.5 cm past a face. So each axis keeps its own reference: the newest reading that confirmed the motion
*on that axis*, and the sums of the commands since. From it the axis reckons its interval at the gain upper bound
(the hull of the partial sums, as ``PositionBound``, widened by the coupling from the other axes), and the bound
takes the state's own interval on that axis only when the axis confirms:

- an axis the commands moved (certain net move on it >= ``MIN_CONFIRM_M``) confirms when the reading went at least
  ``AXIS_CONFIRM_SHARE`` of that move along it, less the noise and the coupling the other axes' moves allow;
- a quiet axis confirms when the reading stayed within that same tolerance of its (small) net move, once the motion
  as a whole carries evidence (certain net move >= ``MIN_CONFIRM_M``; an arm at rest confirms nothing).

There is no allowance for the arm's lag in the share: a sensor that shows 60% of the motion must never confirm, so an
honest arm that lags a step behind its commands (the simulated Fetch's y axis does) confirms only once the window is
long enough (about seven steps of acceleration), and until then the axis is bounded by its reckoning, which contains
it. Unconfirmed axes never stop the robot here: ``PositionBound``'s judgements on the motion as a whole do that.
"""

from __future__ import annotations

import math

AXIS_CONFIRM_SHARE = 0.85  # share of an axis's certain net move the reading must go along it (an honest arm: > 0.9)
AXIS_COUPLING_SHARE = 0.1  # metres an axis may move per metre of certain net move on the other axes (kinematics)


class AxisReckoning:
    """One axis's reference and the reckoning since it (module docstring).

    :param axis: the axis this reckoning bounds (index into positions and moves).
    :param dims: Cartesian axes.
    :param gain_max: the spec's actuator gain upper bound (metres moved per metre commanded).
    :param noise_m: allowance for the difference of two noisy positions (metres).
    :param unknown_move_m: per axis, the largest move of a command no longer remembered (metres at command scale).
    :param min_confirm_m: metres of certain net move below which nothing confirms (noise, settling).
    :param stiction_m: certain moves shorter than this (metres, nominal gain) judge nothing (static friction).
    """

    def __init__(
        self,
        axis: int,
        dims: int,
        gain_max: float,
        noise_m: float,
        unknown_move_m: float,
        min_confirm_m: float,
        stiction_m: float,
    ) -> None:
        self.axis = axis
        self._dims = dims
        self._gain_max = gain_max
        self._noise_m = noise_m
        self._unknown_move_m = unknown_move_m
        self._min_confirm_m = min_confirm_m
        self._stiction_m = stiction_m
        self.anchor(0.0, 0.0, 0.0)

    def anchor(self, position: float, low: float, high: float) -> None:
        """A new reference: this axis's reading (metres) and its interval from the state's own bound."""
        self._ref = position
        self._ref_low, self._ref_high = low, high
        self._sum = [0.0] * self._dims  # commands possibly applied since the reference (metres, command scale)
        self._counted: set[int] = set()  # their sequence numbers
        self._reach_low = self._reach_high = 0.0  # hull of gain_max x the partial sums on this axis (metres)
        self._farthest_m = 0.0  # the largest |S_k| over all axes (metres at command scale)
        self._net = [0.0] * self._dims  # certain net move since the reference (metres, nominal gain)

    def reckon(self, applied_m: list[tuple[int, list[float] | None]]) -> None:
        """Advance the partial sums by the commands possibly applied (a number counted before is skipped)."""
        gain, a = self._gain_max, self.axis
        for seq, move in applied_m:
            if seq in self._counted:
                continue
            self._counted.add(seq)
            if move is None:  # a command no longer remembered: any move, both ways
                self._reach_low -= gain * self._unknown_move_m
                self._reach_high += gain * self._unknown_move_m
                self._farthest_m += self._unknown_move_m * math.sqrt(self._dims)
                continue
            self._sum = [t + m for t, m in zip(self._sum, move, strict=True)]
            self._reach_low = min(self._reach_low, gain * self._sum[a])
            self._reach_high = max(self._reach_high, gain * self._sum[a])
            self._farthest_m = max(self._farthest_m, math.hypot(*self._sum))

    def add_certain(self, moves: list[list[float]] | None) -> None:
        """Fold the moves certainly applied since the previous state (metres at nominal gain) into the net move."""
        for move in moves or ():
            if math.hypot(*move) >= self._stiction_m:
                self._net = [n + m for n, m in zip(self._net, move, strict=True)]

    def interval(self) -> tuple[float, float]:
        """Where the commands since the reference can have taken this axis (metres): the reference's interval
        moved by the reckoning, widened by the coupling the other axes' commands allow."""
        coupling = AXIS_COUPLING_SHARE * self._gain_max * self._farthest_m
        return self._ref_low + self._reach_low - coupling, self._ref_high + self._reach_high + coupling

    @property
    def span_m(self) -> float:
        """The width of the reckoned interval (metres)."""
        low, high = self.interval()
        return high - low

    def confirms(self, position: float) -> bool:
        """Whether this axis's reading confirms the certain motion since the reference (module docstring)."""
        net_m = math.hypot(*self._net)
        if net_m < self._min_confirm_m:
            return False
        own = self._net[self.axis]
        others_m = math.sqrt(max(0.0, net_m * net_m - own * own))
        tolerance = self._noise_m + AXIS_COUPLING_SHARE * others_m
        measured = position - self._ref
        if abs(own) >= self._min_confirm_m:
            return measured * math.copysign(1.0, own) >= AXIS_CONFIRM_SHARE * abs(own) - tolerance
        return abs(measured - own) <= tolerance + (1.0 - AXIS_CONFIRM_SHARE) * self._min_confirm_m

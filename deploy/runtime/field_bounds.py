"""The plausibility bound of every state value outside the position: what the state checker's ``field_out_of_range``
judges (``deploy.runtime.state_check``).

numpy-free, robot side. A field the spec's ``state_bounds`` names (e.g. a finger joint: the robot model's limits, in
its units) lies in that range widened by the noise allowance; a velocity (a field named in ``VELOCITY_FIELDS``,
metres per control step) at most ``VELOCITY_MARGIN`` times what the spec's plausible speed allows in one control
step, plus the noise of a velocity differenced from two noisy positions; any other field (a length in metres) no
larger than the reachable envelope's diagonal. A ``state_bounds`` name the contract has no field of, or the
position's (the workspace bounds it), is refused at construction: a misspelt name must not leave its field loosely
bounded.
"""

from __future__ import annotations

import math
import operator

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec

# State fields that are velocities, in metres per control step (deploy.contract: FETCH_STATE_FIELDS' grip_velp and
# gripper_vel, POINT_STATE_FIELDS' vel); every other field outside the position slice is a length in metres.
VELOCITY_FIELDS = frozenset({"grip_velp", "gripper_vel", "vel"})
# A velocity beyond this many times the spec's plausible speed is a glitch, not motion. FetchReach's honest
# velocities (bang-bang and random full actions, 2,000 steps) peaked at 0.65 x the plausible speed: the margin leaves
# 3x headroom. (It was 10: a velocity glitch of 0.5 m per control step, 13 m/s, reached the policy.)
VELOCITY_MARGIN = 2.0


class FieldBounds:
    """Lower and upper bounds of the state values outside the position slice (see the module docstring).

    :param spec: the robot spec (``state_bounds``, plausible speed, control period, noise, its id for errors).
    :param contract: the policy's contract (field names and spans, the position field).
    :param noise_m: the noise allowance added to a bound (metres; the checker's sigmas times the largest noise std).
    :param diagonal_m: the reachable envelope's diagonal (metres): the bound of any other length.
    """

    def __init__(self, spec: RobotSpec, contract: ObservationContract, noise_m: float, diagonal_m: float) -> None:
        names = [name for name, _ in contract.state_fields]
        position_name = contract.position_field
        for name in spec.state_bounds or {}:
            if name not in names or name == position_name:
                bounded = ", ".join(n for n in names if n != position_name)
                why = "is the position, which the workspace bounds" if name == position_name else "is no state field"
                raise ValueError(
                    f"robot spec {spec.robot_id!r}: 'state_bounds.{name}' {why} of the policy's observation contract "
                    f"({contract.name}); the fields it may bound: {bounded}. Fix the name in the spec file"
                )
        velocity_limit = VELOCITY_MARGIN * spec.plausible_speed_m_s * spec.control_period_s + math.sqrt(2.0) * noise_m
        position = range(*contract.position_slice)
        self.index: list[int] = []  # state indices judged, with their bounds below
        self.low: list[float] = []
        self.high: list[float] = []
        for name, start, stop in contract.field_spans():
            default = velocity_limit if name in VELOCITY_FIELDS else diagonal_m  # allowance included
            given = (spec.state_bounds or {}).get(name)
            lo, hi = (-default, default) if given is None else (given[0] - noise_m, given[1] + noise_m)
            for i in range(start, stop):
                if i not in position:
                    self.index.append(i)
                    self.low.append(lo)
                    self.high.append(hi)

    def violated(self, values: list[float]) -> bool:
        """Whether a state (its values as Python floats) has a value outside its bound (a NaN is outside)."""
        # map: no Python frame per value (runs for every state); a NaN compares False, so it is out of range
        checked = list(map(values.__getitem__, self.index))
        above_low = all(map(operator.le, self.low, checked))
        return not (above_low and all(map(operator.le, checked, self.high)))

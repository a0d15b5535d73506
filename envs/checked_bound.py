"""The position bound a robot's runtime plans from, reckoned in simulation from the true gripper positions.

The runtime's barriers never plan from a bare reading: each accepted state gets a bound (``deploy.runtime.
state_check.motion_bound``), its position widened toward where the previous accepted position plus the step's reach
could have taken the arm (the commands applied between the two states at the spec's gain bound, plus half the
previous step's motion carried on), so a reading that lags the arm is still inside. A moving arm's bound is a few
centimetres wide: a shield that planned from the point alone let a policy brush past its partner closer than the
cell's barrier allows (trained cell policy: 85% behind a point-bound shield, 62% on the cell).

``CheckedBound`` feeds the runtime's own ``PositionBound`` (``deploy.runtime.position_bound``) what the runtime's
state intake would: each new position with its state's bound, the command the arm applied in the step (at command
scale, and at the spec's nominal gain as the move it certainly made) and its motion. Its bound is the runtime's: a
healthy arm's state bound, wider while its motion is unconfirmed (commands below static friction, a lag). And its
faults are the runtime's: an arm that does not follow its commands (``not_following``: the simulated Fetch pressed
against the edge of its reach, where its mocap moves on and the arm does not) or whose reckoning grew too wide
(``motion_unconfirmed``) would be safe-stopped on the robot; ``fault`` names the first. Not modelled: the state
checks that judge the wire (stamps, sequence numbers, glitches), which a simulation's states always pass.

numpy; the bound's arithmetic is the robot side's own (one implementation).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from deploy.robot_spec import RobotSpec
from deploy.runtime.state_check import BOUND_NOISE_SIGMAS, motion_bound, noise_check_m, step_reach_m
from deploy.runtime.state_intake import position_bound_for

Bounds = tuple[tuple[float, ...], tuple[float, ...]]


class CheckedBound:
    """One arm's runtime bound and stop from its true positions (module docstring). Metres; commands in command units.

    :param spec: the robot spec the runtime loads (command scale, gains, position noise, delay).
    :param largest_command: the largest command component the contract allows (command units).
    """

    def __init__(self, spec: RobotSpec, largest_command: float) -> None:
        self._scale_m = spec.command_scale_m
        self._step_m_per_unit = spec.command_scale_m * spec.actuator_gain_max
        self._nominal_m = [spec.command_scale_m * float(g) for g in spec.actuator_gain]
        self._noise_m = tuple(BOUND_NOISE_SIGMAS * float(v) for v in spec.observation_noise_std_m)
        self._dims = len(self._noise_m)
        follow_noise_m = max(noise_check_m(spec))
        self._bound = position_bound_for(spec, self._dims, follow_noise_m, largest_command * spec.command_scale_m)
        self._previous = np.zeros(self._dims)
        self._motion = np.zeros(self._dims)
        self._seq = 0  # numbers the applied commands, as the runtime's line does (the bound counts each once)
        self.fault = ""  # the first fault the runtime would stop the arm for ("": none)
        self.bounds: Bounds = ((0.0,) * self._dims, (0.0,) * self._dims)

    def reset(self, position: np.ndarray) -> Bounds:
        """A new reference (a HOMED state): the position, widened by the noise only."""
        self._previous = np.asarray(position, dtype=np.float64)[: self._dims].copy()
        self._motion = np.zeros(self._dims)
        self.fault = ""
        point = self._previous.tolist()
        low, high = motion_bound(point, point, 0.0, self._noise_m)
        self._bound.reset()
        self._bound.anchor(point, low, high)
        self.bounds = (low, high)
        return self.bounds

    def update(self, position: np.ndarray, applied: np.ndarray) -> Bounds:
        """The bound of the state at ``position`` after a step in which the arm applied ``applied`` (its command;
        the first ``dims`` values are Cartesian); a fault the state shows is kept in ``fault``."""
        point = np.asarray(position, dtype=np.float64)[: self._dims]
        units = np.asarray(applied, dtype=np.float64)[: self._dims].tolist()
        reach = step_reach_m(math.hypot(*units), self._step_m_per_unit, self._motion.tolist())
        low, high = motion_bound(point.tolist(), self._previous.tolist(), reach, self._noise_m)
        motion = point - self._previous
        self._seq += 1
        applied_m = [(self._seq, [u * self._scale_m for u in units])]
        certain_m = [[u * g for u, g in zip(units, self._nominal_m, strict=True)]]
        fault = self._bound.update(point.tolist(), low, high, applied_m, certain_m, tuple(motion.tolist()))
        self.fault = self.fault or fault
        self._motion, self._previous = motion, point.copy()
        self.bounds = (tuple(self._bound.low), tuple(self._bound.high))  # type: ignore[arg-type]
        return self.bounds

    # Episode state (snapshots) --------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "bound": copy.deepcopy(self._bound),
            "previous": self._previous.copy(),
            "motion": self._motion.copy(),
            "seq": self._seq,
            "fault": self.fault,
            "bounds": self.bounds,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._bound = copy.deepcopy(state["bound"])
        self._previous = np.asarray(state["previous"], dtype=np.float64).copy()
        self._motion = np.asarray(state["motion"], dtype=np.float64).copy()
        self._seq, self.fault, self.bounds = int(state["seq"]), str(state["fault"]), state["bounds"]

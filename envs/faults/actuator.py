"""Actuator faults: the motors do something other than the command applied, while the robot reports the command
applied (its delay line names it) and its sensors read the truth."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from envs.faults.base import RobotFault

if TYPE_CHECKING:
    from deploy.robot_spec import RobotSpec

GAIN_SPREAD_SIGMAS = 3.0  # the calibrated gain range reaches this many spreads below the measured gain


class MotorStall(RobotFault):
    """The motors stop: every command applied moves the arm nowhere (its position commands are zeroed)."""

    kind = "motor_stall"

    def actuation(self, action: np.ndarray) -> np.ndarray:
        out = np.array(action, dtype=np.float64)
        out[:3] = 0.0
        return out


class MotorGain(RobotFault):
    """The actuator gain changes mid-run: position commands are executed ``factor`` times as far as before.

    :param factor: new gain / the simulated arm's gain (which is the spec's measured ``actuator_gain``).
    """

    kind = "motor_gain"

    def __init__(self, factor: float) -> None:
        self.factor = float(factor)

    def within_spec(self, spec: RobotSpec, period_s: float) -> bool:
        return all(
            g - GAIN_SPREAD_SIGMAS * s <= self.factor * g <= spec.actuator_gain_max
            for g, s in zip(spec.actuator_gain, spec.actuator_gain_spread, strict=True)
        )

    def actuation(self, action: np.ndarray) -> np.ndarray:
        out = np.array(action, dtype=np.float64)
        out[:3] *= self.factor
        return out

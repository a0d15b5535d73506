"""Sensor faults: what the robot reports of its gripper position goes wrong while the arm moves truly.

Each acts on the position field of the state (``contract.position_slice``, metres); the other fields stay true.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from envs.faults.base import RobotFault

if TYPE_CHECKING:
    from deploy.robot_spec import RobotSpec
    from envs.sim_robot import SimRobot


class PositionFault(RobotFault):
    """Base of the position faults: knows where the position sits in the state vector."""

    def __init__(self) -> None:
        self._pos = slice(0, 3)

    def begin(self, robot: SimRobot) -> None:
        self._pos = slice(*robot.contract.position_slice)

    def reported_state(self, state: np.ndarray) -> np.ndarray:
        out = np.array(state, dtype=np.float64)
        out[self._pos] = self.position(out[self._pos])
        return out

    def position(self, true_m: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class SensorFreeze(PositionFault):
    """The position sensor freezes: every state reports the position of the first state after the fault began
    (new sequence numbers, new stamps: only the position is stuck)."""

    kind = "sensor_freeze"

    def __init__(self) -> None:
        super().__init__()
        self._held: np.ndarray | None = None

    def position(self, true_m: np.ndarray) -> np.ndarray:
        if self._held is None:
            self._held = true_m.copy()
        return self._held.copy()


class SensorOffset(PositionFault):
    """A step offset on the reported position.

    :param offset_m: added to the position (metres, per axis).
    """

    kind = "sensor_offset"

    def __init__(self, offset_m: tuple[float, float, float]) -> None:
        super().__init__()
        self.offset_m = [float(v) for v in offset_m]

    def position(self, true_m: np.ndarray) -> np.ndarray:
        return true_m + np.asarray(self.offset_m)


class SensorDrift(PositionFault):
    """An offset that grows with every state reported.

    :param rate_m_per_state: added per state since the fault began (metres per state, per axis).
    """

    kind = "sensor_drift"

    def __init__(self, rate_m_per_state: tuple[float, float, float]) -> None:
        super().__init__()
        self.rate_m_per_state = [float(v) for v in rate_m_per_state]
        self._states = 0

    def position(self, true_m: np.ndarray) -> np.ndarray:
        self._states += 1
        return true_m + self._states * np.asarray(self.rate_m_per_state)


class SensorScale(PositionFault):
    """The sensor's scale is wrong: motion since the fault began is reported ``scale`` times its true size.

    :param scale: reported / true displacement (1.0: no fault).
    """

    kind = "sensor_scale"

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = float(scale)
        self._origin: np.ndarray | None = None

    def position(self, true_m: np.ndarray) -> np.ndarray:
        if self._origin is None:
            self._origin = true_m.copy()
        return self._origin + self.scale * (true_m - self._origin)


class SensorNoise(PositionFault):
    """Gaussian noise on the reported position.

    :param std_m: standard deviation (metres, every axis).
    :param seed: seed of the noise.
    """

    kind = "sensor_noise"

    def __init__(self, std_m: float, seed: int) -> None:
        super().__init__()
        self.std_m = float(std_m)
        self.seed = int(seed)
        self._rng = np.random.default_rng(seed)

    def within_spec(self, spec: RobotSpec, period_s: float) -> bool:
        return self.std_m <= min(spec.observation_noise_std_m)

    def position(self, true_m: np.ndarray) -> np.ndarray:
        return true_m + self._rng.normal(0.0, self.std_m, size=true_m.shape)


class NanState(RobotFault):
    """Every state value is NaN (``SimFaults.nan_state``)."""

    kind = "nan_state"

    def begin(self, robot: SimRobot) -> None:
        robot.faults.nan_state = True

    def end(self, robot: SimRobot) -> list[bytes]:
        robot.faults.nan_state = False
        return []


class FrozenSender(RobotFault):
    """The robot resends its last state frame unchanged, same sequence number (``SimFaults.freeze_seq``)."""

    kind = "frozen_sender"

    def begin(self, robot: SimRobot) -> None:
        robot.faults.freeze_seq = True

    def end(self, robot: SimRobot) -> list[bytes]:
        robot.faults.freeze_seq = False
        return []

"""The robot spec's ``block_tracker`` section: a cell that reports a block's position (a push task).

On a real cell a tracker or a camera measures the block; the spec states how well (noise, metres) and how often (rate,
Hz), how close the gripper must be to move it, and where the table is (a block outside that box fell off). A robot
whose spec has this section sends the block's position in its state (``deploy.contract.ObservationContract
.block_slice``); one without it sends none. The file form (optional section of ``deploy.robot_spec``)::

    block_tracker:
      noise_std_m: [0.001, 0.001, 0.001]   # std of the reported block position at rest, per axis, metres
      rate_hz: 25.0                        # new block readings per second (<= the control rate; held in between)
      gripper_near_m: 0.08                 # the block moves only while the gripper is this close to it (metres)
      table_low: [1.05, 0.40, 0.39]        # the block's centre stays inside this box while it is on the table
      table_high: [1.55, 1.10, 0.60]

stdlib only (the runtime loads specs on the robot).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deploy.robot_spec_sections import AXES, RobotSpecError, get_key, number, vector

BLOCK_TRACKER_KEYS = ("noise_std_m", "rate_hz", "gripper_near_m", "table_low", "table_high")
MAX_TRACKER_NOISE_M = 0.05  # a tracker noisier than this cannot tell a push from a glitch
MAX_TRACKER_RATE_HZ = 10_000.0
MAX_GRIPPER_NEAR_M = 1.0


@dataclass(frozen=True)
class BlockTrackerSpec:
    """What the cell's block tracker is (see the module docstring). Units: metres, Hz."""

    noise_std_m: tuple[float, float, float]
    rate_hz: float
    gripper_near_m: float
    table_low: tuple[float, float, float]
    table_high: tuple[float, float, float]

    def steps_per_reading(self, control_period_s: float) -> int:
        """Control steps between two fresh block readings (>= 1; the reading is held in between)."""
        return max(1, round(1.0 / (self.rate_hz * control_period_s)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "noise_std_m": list(self.noise_std_m),
            "rate_hz": self.rate_hz,
            "gripper_near_m": self.gripper_near_m,
            "table_low": list(self.table_low),
            "table_high": list(self.table_high),
        }


def parse_block_tracker(data: Any, control_period_s: float) -> BlockTrackerSpec | None:
    """The ``block_tracker`` section (None when absent); ``RobotSpecError`` naming the key otherwise."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise RobotSpecError(f"'block_tracker' must be a mapping, got {data!r}")
    unknown = sorted(set(data) - set(BLOCK_TRACKER_KEYS))
    if unknown:
        raise RobotSpecError(f"unknown key 'block_tracker.{unknown[0]}'; allowed keys: {', '.join(BLOCK_TRACKER_KEYS)}")
    where = "block_tracker"
    noise = vector(get_key(data, "noise_std_m", where), "block_tracker.noise_std_m", 0.0, MAX_TRACKER_NOISE_M)
    control_hz = 1.0 / control_period_s
    rate = number(get_key(data, "rate_hz", where), "block_tracker.rate_hz", 1e-3, MAX_TRACKER_RATE_HZ)
    if rate > control_hz * (1 + 1e-9):
        raise RobotSpecError(
            f"'block_tracker.rate_hz' = {rate} is above the control rate ({control_hz:g} Hz): the robot reports one "
            "state per control step; give the rate the block reaches the robot at"
        )
    near = number(get_key(data, "gripper_near_m", where), "block_tracker.gripper_near_m", 1e-3, MAX_GRIPPER_NEAR_M)
    low = vector(get_key(data, "table_low", where), "block_tracker.table_low", -10.0, 10.0)
    high = vector(get_key(data, "table_high", where), "block_tracker.table_high", -10.0, 10.0)
    for axis in range(AXES):
        if not low[axis] < high[axis]:
            raise RobotSpecError(
                f"'block_tracker.table_low[{axis}]' = {low[axis]} must be below 'block_tracker.table_high[{axis}]' = "
                f"{high[axis]}"
            )
    return BlockTrackerSpec(noise, rate, near, low, high)

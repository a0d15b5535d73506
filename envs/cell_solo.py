"""One arm of the two-arm cell alone: the same place, goals and delay, no partner (baseline (d) of the cell study).

The scene holds only the chosen arm (``envs.cell_scene`` with ``arms=(arm,)``); goals are drawn from the cell's
goal box in the arm's own frame (``envs.cell_goals``), and the observation is the cell's arm row without the
partner block: ``[10 state values, H commands]`` (the ``fetch_reach`` contract), a prefix of the cell's row. A
policy trained here "ignores the other arm" when run in the cell (``TwoArmCellEnv``'s row minus its last 3 values).
``DelayedGoalEnv`` supplies the delay line, the reward and the snapshot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deploy.contract import fetch_reach_contract
from deploy.robot_spec import RobotSpec, as_robot_spec
from envs.cell_scene import CellScene
from envs.delayed_goal_env import DelayedGoalEnv, check_delay_range


class CellSoloReachEnv(DelayedGoalEnv):
    """One cell arm alone; arguments as :class:`envs.two_arm_cell.TwoArmCellEnv` where they share a name.

    :param arm: which arm of the cell (0 or 1); the observation is in its own frame either way.
    """

    def __init__(
        self,
        arm: int = 0,
        delay: int | None = None,
        delay_range: tuple[int, int] | None = None,
        distance_threshold: float = 0.05,
        goal_range_m: float = 0.15,
        goal_drop_m: float = 0.1,
        start_gap_m: float = 0.3,
        max_episode_steps: int = 50,
        spec: RobotSpec | str | None = None,
    ) -> None:
        if arm not in (0, 1):
            raise ValueError(f"arm must be 0 or 1, got {arm}")
        robot_spec = as_robot_spec(spec)
        if delay_range is None:
            delay_range = robot_spec.delay_range if delay is None else (int(delay), int(delay))
        delay_range = check_delay_range(delay_range)
        super().__init__(
            fetch_reach_contract(delay_range[1]), delay_range, 0.0, distance_threshold, max_episode_steps, "sparse"
        )
        self.arm = arm
        self.scene = CellScene((arm,), start_gap_m)
        centre = np.array([*self.scene.centre, self.scene.start_grip[arm][2]])
        self.goal_low = centre + np.array([-goal_range_m, -goal_range_m, -goal_drop_m])
        self.goal_high = centre + np.array([goal_range_m, goal_range_m, goal_range_m])

    def _physics_reset(self) -> None:
        self.scene.set_state(self.scene.initial_state)

    def _physics_apply(self, command: np.ndarray) -> None:
        self.scene.control_step({self.arm: command})

    def _physics_state(self) -> np.ndarray:
        return self.scene.arm_state(self.arm)

    def _physics_get(self) -> Any:
        return self.scene.get_state()

    def _physics_set(self, physics: Any) -> None:
        self.scene.set_state(physics)

    def _sample_goal(self) -> np.ndarray:
        return self.np_random.uniform(self.goal_low, self.goal_high)

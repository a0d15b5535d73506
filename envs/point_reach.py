"""A tiny pure-numpy goal env with the FetchReach contract's shape: a 3-D point mass reaching a goal.

Fast (no MuJoCo) so that learning tests finish in seconds. Dynamics per control step (metres):

    vel = action[:3] * action_scale_m         (the applied, possibly delayed, command)
    pos = clip(pos + vel, bounds_low, bounds_high)

The start is the centre of the box; goals are uniform in ``centre +- goal_range_m`` per axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deploy.contract import point_reach_contract
from envs.delayed_goal_env import DelayedGoalEnv, check_delay_range

POINT_START_M = np.array([0.0, 0.0, 0.0])
POINT_BOUND_M = 0.3  # half-width of the reachable box around the start, metres
POINT_LOW_M = POINT_START_M - POINT_BOUND_M
POINT_HIGH_M = POINT_START_M + POINT_BOUND_M
POINT_STATE_DIM = 6  # pos (3) + vel (3)


class PointReachEnv(DelayedGoalEnv):
    """Point mass reaching a goal with delayed commands (see DelayedGoalEnv for the shared options).

    :param delay: fixed delay in control steps (ignored when ``delay_range`` is given).
    :param delay_range: inclusive per-episode delay range in control steps.
    :param goal_range_m: goals are drawn uniformly within +- this many metres per axis of the start.
    :param obs_noise_std_m: position noise std in metres.
    :param distance_threshold: success radius in metres.
    :param max_episode_steps: episode length in control steps.
    :param reward_type: "sparse" or "dense".
    :param history_len: commands carried in the observation (control steps); None = the max delay. Set it to
        the trained policy's history when simulating a robot whose delay has since grown.
    :param action_gain: actuator gain error (1.1 = the arm moves 10% further than commanded).
    """

    def __init__(
        self,
        delay: int = 1,
        delay_range: tuple[int, int] | None = None,
        goal_range_m: float = 0.15,
        obs_noise_std_m: float = 0.0,
        distance_threshold: float = 0.05,
        max_episode_steps: int = 50,
        reward_type: str = "sparse",
        history_len: int | None = None,
        action_gain: float = 1.0,
    ) -> None:
        delay_range = check_delay_range(delay_range if delay_range is not None else (delay, delay))
        if not 0 < goal_range_m <= POINT_BOUND_M:
            raise ValueError(f"goal_range_m must be in (0, {POINT_BOUND_M}] metres, got {goal_range_m}")
        super().__init__(
            point_reach_contract(delay_range[1] if history_len is None else history_len),
            delay_range,
            obs_noise_std_m,
            distance_threshold,
            max_episode_steps,
            reward_type,
            action_gain,
        )
        self.goal_range_m = float(goal_range_m)
        # One state buffer [pos, vel] (metres, metres per control step); pos and vel are views into it, so the
        # step updates them in place and the observation copies the buffer once.
        self._state = np.zeros(POINT_STATE_DIM)
        self._point_pos = self._state[:3]
        self._point_vel = self._state[3:]
        self._scale = float(self.contract.action_scale_m)

    def _physics_reset(self) -> None:
        self._point_pos[:] = POINT_START_M
        self._point_vel[:] = 0.0

    def _physics_apply(self, command: np.ndarray) -> None:
        # vel = command * scale; pos = clip(pos + vel, low, high), in place
        np.multiply(command[:3], self._scale, out=self._point_vel)
        np.add(self._point_pos, self._point_vel, out=self._point_pos)
        np.maximum(self._point_pos, POINT_LOW_M, out=self._point_pos)
        np.minimum(self._point_pos, POINT_HIGH_M, out=self._point_pos)

    def _physics_state(self) -> np.ndarray:
        return self._state.copy()

    def _physics_get(self) -> Any:
        return self._state.copy()

    def _physics_set(self, physics: Any) -> None:
        physics = np.asarray(physics, dtype=np.float64)
        if physics.shape != (POINT_STATE_DIM,):
            raise ValueError(f"point state must have {POINT_STATE_DIM} values [pos, vel], got shape {physics.shape}")
        self._state[:] = physics

    def _sample_goal(self) -> np.ndarray:
        return POINT_START_M + self.np_random.uniform(-self.goal_range_m, self.goal_range_m, size=3)

"""Delayed-action FetchReach: gymnasium-robotics' FetchReach-v4 (MuJoCo) whose commands arrive k steps late.

The Fetch arm is driven by Cartesian displacement of its mocap gripper at 25 Hz (20 MuJoCo substeps of 2 ms).
``DelayedGoalEnv`` adds the delay, noise, contract observation and snapshot; this file only wraps the MuJoCo
physics. The goal is drawn by this env's RNG with FetchReach's distribution (uniform within ``goal_range_m``
of the initial gripper position) so that one RNG state describes the whole episode.

Robot state (the contract's ``FETCH_STATE_FIELDS``): grip_pos (m), gripper_state (m),
grip_velp (m per control step), gripper_vel (m per control step) - the 10 values FetchReach itself returns.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
from gymnasium_robotics.envs.fetch.reach import MujocoFetchReachEnv

from calibration.schema import DEFAULT_SIM_CALIBRATION, Calibration, load_calibration
from deploy.contract import fetch_reach_contract
from envs.delayed_goal_env import DelayedGoalEnv

_FULL_STATE = mujoco.mjtState.mjSTATE_INTEGRATION


class DelayedFetchReachEnv(DelayedGoalEnv):
    """FetchReach-v4 with actuation delay; defaults come from a calibration file.

    :param delay: fixed delay in control steps; ``None`` takes the calibration file's ``action_delay.steps``.
    :param delay_range: inclusive per-episode delay range in control steps; overrides ``delay``.
    :param obs_noise_std_m: gripper position noise std in metres; ``None`` takes the calibration file's.
    :param distance_threshold: success radius in metres (FetchReach: 0.05).
    :param goal_range_m: goals are drawn within +- this many metres per axis (FetchReach: 0.15).
    :param max_episode_steps: episode length in control steps (FetchReach: 50).
    :param reward_type: "sparse" or "dense".
    :param calibration: path of the calibration file that supplies the defaults.
    """

    def __init__(
        self,
        delay: int | None = None,
        delay_range: tuple[int, int] | None = None,
        obs_noise_std_m: float | tuple[float, float, float] | None = None,
        distance_threshold: float = 0.05,
        goal_range_m: float = 0.15,
        max_episode_steps: int = 50,
        reward_type: str = "sparse",
        calibration: str | Calibration | None = None,
    ) -> None:
        if isinstance(calibration, Calibration):
            cal = calibration
        else:
            cal = load_calibration(calibration or DEFAULT_SIM_CALIBRATION)
        if delay_range is None:
            k = cal.delay_steps if delay is None else int(delay)
            delay_range = (k, k)
        if obs_noise_std_m is None:
            obs_noise_std_m = cal.observation_noise_std_m
        if not 0 < goal_range_m <= 0.3:
            raise ValueError(f"goal_range_m must be in (0, 0.3] metres, got {goal_range_m}")
        super().__init__(
            fetch_reach_contract(int(delay_range[1])),
            (int(delay_range[0]), int(delay_range[1])),
            obs_noise_std_m,
            distance_threshold,
            max_episode_steps,
            reward_type,
        )
        self.calibration = cal
        self.goal_range_m = float(goal_range_m)
        self._fetch = MujocoFetchReachEnv(reward_type=reward_type)
        self._model, self._data = self._fetch.model, self._fetch.data
        self._state_size = mujoco.mj_stateSize(self._model, _FULL_STATE)

    @property
    def model(self) -> mujoco.MjModel:
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        return self._data

    @property
    def initial_gripper_xpos(self) -> np.ndarray:
        return self._fetch.initial_gripper_xpos.copy()

    def _physics_reset(self) -> None:
        self._fetch._reset_sim()

    def _physics_apply(self, command: np.ndarray) -> None:
        self._fetch._set_action(command.astype(np.float32))
        self._fetch._mujoco_step(command)
        self._fetch._step_callback()

    def _physics_state(self) -> np.ndarray:
        return np.asarray(self._fetch._get_obs()["observation"], dtype=np.float64)

    def _physics_get(self) -> Any:
        state = np.empty(self._state_size, dtype=np.float64)
        mujoco.mj_getState(self._model, self._data, state, _FULL_STATE)
        return state

    def _physics_set(self, physics: Any) -> None:
        physics = np.asarray(physics, dtype=np.float64)
        if physics.shape != (self._state_size,):
            raise ValueError(f"MuJoCo state must have {self._state_size} values, got {physics.shape}")
        mujoco.mj_setState(self._model, self._data, physics, _FULL_STATE)
        mujoco.mj_forward(self._model, self._data)

    def _sample_goal(self) -> np.ndarray:
        return self._fetch.initial_gripper_xpos[:3] + self.np_random.uniform(
            -self.goal_range_m, self.goal_range_m, size=3
        )

    def close(self) -> None:
        self._fetch.close()
        super().close()

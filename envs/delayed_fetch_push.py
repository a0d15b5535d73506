"""Delayed-action FetchPush as the robot serves it: gymnasium-robotics' FetchPush-v4 physics with the robot spec's
delay and noise, the push contract (the block's position in the state) and a block tracker.

``DelayedFetchPush-v0`` (``envs.delayed_fetch``) is the training task: the generic delay wrapper around the
gymnasium-robotics env. This env (``DelayedFetchPushRobot-v0``) is the same task on the simulated push cell, built
like ``DelayedFetchReachEnv`` on ``DelayedGoalEnv``: it carries the contract the exporter and the runtime need and the
spec the simulated robot serves. With the tracker's noise off (``block_noise_std_m=0``) it returns, for the same seed
and commands, the observation ``DelayedFetchPush-v0`` returns, bit for bit (a test shows it): both draw the block and
the goal from the same generator in the same order, so a policy trained on one runs on the other unchanged.

The block tracker (spec ``block_tracker``): a new reading of the block every ``steps_per_reading`` control steps, with
Gaussian noise of ``noise_std_m`` per axis, held in between; ``object_rel_pos`` is recomputed from the reported
positions, as a cell that derives it from its tracker would.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
from gymnasium_robotics.envs.fetch.push import MujocoFetchPushEnv

from deploy.contract import FETCH_PUSH_BLOCK_SLICE, fetch_push_contract
from deploy.robot_spec import DEFAULT_SIM_SPEC, RobotSpec, as_robot_spec
from deploy.runtime.compatibility import convention_mismatches
from envs.delayed_goal_env import DelayedGoalEnv, check_delay_range
from envs.fetch_lookups import cache_fetch_lookups

_FULL_STATE = mujoco.mjtState.mjSTATE_INTEGRATION
DEFAULT_PUSH_SPEC = DEFAULT_SIM_SPEC.with_name("sim_fetch_push.yaml")  # the simulated push cell
_BLOCK = slice(*FETCH_PUSH_BLOCK_SLICE)
_GRIP = slice(0, 3)
_REL = slice(6, 9)  # object_rel_pos = object_pos - grip_pos


class DelayedFetchPushEnv(DelayedGoalEnv):
    """FetchPush-v4 with actuation delay and a block tracker; delay and noise from the robot spec unless overridden.

    :param delay: fixed delay in control steps; ``None`` takes the spec's ``action_delay.range``.
    :param delay_range: inclusive per-episode delay range in control steps; overrides ``delay``.
    :param obs_noise_std_m: gripper position noise std in metres; ``None`` takes the spec's.
    :param block_noise_std_m: block tracker noise std in metres; ``None`` takes the spec's ``block_tracker``.
    :param distance_threshold: success radius of the block around the goal, metres (FetchPush: 0.05).
    :param max_episode_steps: episode length in control steps (FetchPush: 50).
    :param reward_type: "sparse" or "dense".
    :param history_len: commands carried in the observation (control steps); None = the max delay.
    :param action_gain: actuator gain error (1.1 = the arm moves 10% further than commanded).
    :param spec: the robot spec (a ``RobotSpec`` or its file) with a ``block_tracker`` section; None:
        ``calibration/sim_fetch_push.yaml``.
    """

    def __init__(
        self,
        delay: int | None = None,
        delay_range: tuple[int, int] | None = None,
        obs_noise_std_m: float | tuple[float, float, float] | None = None,
        block_noise_std_m: float | tuple[float, float, float] | None = None,
        distance_threshold: float = 0.05,
        max_episode_steps: int = 50,
        reward_type: str = "sparse",
        history_len: int | None = None,
        action_gain: float = 1.0,
        spec: RobotSpec | str | None = None,
    ) -> None:
        robot_spec = as_robot_spec(DEFAULT_PUSH_SPEC if spec is None else spec)
        tracker = robot_spec.block_tracker
        if tracker is None:
            raise ValueError(
                f"robot spec {robot_spec.robot_id!r} has no block_tracker section: a push cell reports the block's "
                f"position (see {DEFAULT_PUSH_SPEC.name})"
            )
        if delay_range is None:
            delay_range = robot_spec.delay_range if delay is None else (int(delay), int(delay))
        delay_range = check_delay_range(delay_range)
        if obs_noise_std_m is None:
            obs_noise_std_m = robot_spec.observation_noise_std_m
        if block_noise_std_m is None:
            block_noise_std_m = tracker.noise_std_m
        block_noise = np.broadcast_to(np.asarray(block_noise_std_m, dtype=np.float64), (3,)).copy()
        if np.any(block_noise < 0) or not np.all(np.isfinite(block_noise)):
            raise ValueError(f"block_noise_std_m must be finite and >= 0 metres, got {block_noise_std_m}")
        super().__init__(
            fetch_push_contract(delay_range[1] if history_len is None else history_len),
            delay_range,
            obs_noise_std_m,
            distance_threshold,
            max_episode_steps,
            reward_type,
            action_gain,
        )
        problems = convention_mismatches(robot_spec, self.contract, "the simulated Fetch push cell")
        if problems:
            raise ValueError("; ".join(problems) + ": the spec does not describe this simulated cell")
        self.robot_spec = robot_spec
        self.block_noise_std_m = block_noise
        self.steps_per_reading = tracker.steps_per_reading(robot_spec.control_period_s)
        self._fetch = MujocoFetchPushEnv(reward_type=reward_type)
        cache_fetch_lookups(self._fetch)  # the same observation with the per-step name lookups resolved once
        self._model, self._data = self._fetch.model, self._fetch.data
        self._state_size = mujoco.mj_stateSize(self._model, _FULL_STATE)
        self._reading: np.ndarray | None = None  # the block position the tracker last reported (metres)
        self._reading_age = 0  # control steps since that reading

    @property
    def block_position_m(self) -> np.ndarray:
        """True (noise-free) block position, metres."""
        return self._physics_state()[_BLOCK].copy()

    def _physics_reset(self) -> None:
        self._fetch._np_random = self.np_random  # the block and the goal come from this env's generator
        while not self._fetch._reset_sim():  # as MujocoRobotEnv.reset does
            pass
        self._reading = None

    def _physics_apply(self, command: np.ndarray) -> None:
        action = np.clip(command.astype(np.float32), self._fetch.action_space.low, self._fetch.action_space.high)
        self._fetch._set_action(action)
        self._fetch._mujoco_step(action)
        self._fetch._step_callback()

    def _physics_state(self) -> np.ndarray:
        return np.asarray(self._fetch._get_obs()["observation"], dtype=np.float64).copy()

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
        self._reading = None

    def _sample_goal(self) -> np.ndarray:
        return self._fetch._sample_goal()

    def _sense(self, state: np.ndarray) -> None:
        """The tracker: a fresh noisy reading every ``steps_per_reading`` steps, held in between."""
        if self._reading is None or self._reading_age + 1 >= self.steps_per_reading:
            reading = state[_BLOCK].copy()
            if np.any(self.block_noise_std_m > 0):
                reading += self.np_random.normal(0.0, self.block_noise_std_m)
            self._reading, self._reading_age = reading, 0
        else:
            self._reading_age += 1
        if self._reading.tobytes() != state[_BLOCK].tobytes():
            state[_BLOCK] = self._reading
            state[_REL] = state[_BLOCK] - state[_GRIP]

    def close(self) -> None:
        self._fetch.close()
        super().close()

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

from deploy.contract import fetch_reach_contract
from deploy.robot_spec import RobotSpec, as_robot_spec
from deploy.runtime.compatibility import convention_mismatches
from envs.delayed_goal_env import DelayedGoalEnv, check_delay_range
from envs.fetch_lookups import (
    FINGER_JOINTS,
    GRIP_SITE,
    GRIPPER_JOINTS_OBSERVED,
    ROBOT_JOINT_PREFIX,
    scalar_joint_addresses,
    site_id,
)

_FULL_STATE = mujoco.mjtState.mjSTATE_INTEGRATION
MAX_GOAL_RANGE_M = 0.3  # goals further than this from the start leave the arm's reach (FetchReach uses 0.15)


class DelayedFetchReachEnv(DelayedGoalEnv):
    """FetchReach-v4 with actuation delay; the delay and the noise come from the robot spec unless overridden.

    The spec is the one owner of the robot's delay and noise: an explicit ``delay``, ``delay_range`` or
    ``obs_noise_std_m`` overrides it for this env (a training choice, e.g. a wider delay range) and is recorded by
    the exporter as what the policy was trained for. ``action_gain`` is a simulation knob (a drifted actuator),
    not a spec field: the spec's gain is what calibration measured on the robot, in metres per metre commanded.

    :param delay: fixed delay in control steps; ``None`` takes the spec's ``action_delay.range``
        (the inclusive range the sim randomizes over; ``[steps, steps]`` when the file gives no range).
    :param delay_range: inclusive per-episode delay range in control steps; overrides ``delay``.
    :param obs_noise_std_m: gripper position noise std in metres; ``None`` takes the calibration file's.
    :param distance_threshold: success radius in metres (FetchReach: 0.05).
    :param goal_range_m: goals are drawn within +- this many metres per axis (FetchReach: 0.15).
    :param max_episode_steps: episode length in control steps (FetchReach: 50).
    :param reward_type: "sparse" or "dense".
    :param history_len: commands carried in the observation (control steps); None = the max delay. Set it to
        the trained policy's history when simulating a robot whose delay has since grown.
    :param action_gain: actuator gain error (1.1 = the arm moves 10% further than commanded).
    :param spec: the robot spec (a ``RobotSpec`` or its file); None: ``calibration/sim_fetch.yaml``. Its control
        period must be FetchReach's (0.04 s).
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
        history_len: int | None = None,
        action_gain: float = 1.0,
        spec: RobotSpec | str | None = None,
    ) -> None:
        robot_spec = as_robot_spec(spec)
        if delay_range is None:
            # No argument: the spec's training range (``action_delay.range``, inclusive); ``delay`` fixes k.
            delay_range = robot_spec.delay_range if delay is None else (int(delay), int(delay))
        delay_range = check_delay_range(delay_range)
        if obs_noise_std_m is None:
            obs_noise_std_m = robot_spec.observation_noise_std_m
        if not 0 < goal_range_m <= MAX_GOAL_RANGE_M:
            raise ValueError(f"goal_range_m must be in (0, {MAX_GOAL_RANGE_M}] metres, got {goal_range_m}")
        super().__init__(
            fetch_reach_contract(delay_range[1] if history_len is None else history_len),
            delay_range,
            obs_noise_std_m,
            distance_threshold,
            max_episode_steps,
            reward_type,
            action_gain,
        )
        problems = convention_mismatches(robot_spec, self.contract, "the simulated Fetch arm")
        if problems:
            raise ValueError("; ".join(problems) + ": the spec does not describe this simulated arm")
        self.robot_spec = robot_spec
        self.goal_range_m = float(goal_range_m)
        self._fetch = MujocoFetchReachEnv(reward_type=reward_type)
        self._model, self._data = self._fetch.model, self._fetch.data
        self._state_size = mujoco.mj_stateSize(self._model, _FULL_STATE)
        self._index_robot_state()

    @property
    def model(self) -> mujoco.MjModel:
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        return self._data

    @property
    def initial_gripper_xpos(self) -> np.ndarray:
        return self._fetch.initial_gripper_xpos.copy()

    def _index_robot_state(self) -> None:
        """Resolve, once, the MuJoCo indices FetchReach's observation and step callback look up by name per step.

        FetchReach's ``_get_obs`` reads every robot joint by name (~30 name lookups a step, a quarter of the
        step time) to keep the last two. ``_physics_state`` reads the same memory through these cached indices
        and is checked here, bit for bit, against ``_get_obs`` so that a gymnasium-robotics change fails loudly.
        """
        model = self._model
        robot_joints = [n for n in self._fetch._model_names.joint_names if n.startswith(ROBOT_JOINT_PREFIX)]
        self._grip_site = site_id(model, GRIP_SITE)
        self._gripper_qpos, self._gripper_qvel = scalar_joint_addresses(model, robot_joints[-GRIPPER_JOINTS_OBSERVED:])
        self._finger_qpos, _ = scalar_joint_addresses(model, FINGER_JOINTS)
        self._dt_s = self._fetch.n_substeps * model.opt.timestep  # seconds per control step (velocity scale)
        reference = np.asarray(self._fetch._get_obs()["observation"], dtype=np.float64)
        if self._physics_state().tobytes() != reference.tobytes():
            raise RuntimeError(
                "the cached Fetch state read differs from FetchReach's _get_obs (gymnasium-robotics "
                f"{_gymnasium_robotics_version()}); update DelayedFetchReachEnv._physics_state"
            )

    def _physics_reset(self) -> None:
        self._fetch._reset_sim()

    def _physics_apply(self, command: np.ndarray) -> None:
        self._fetch._set_action(command.astype(np.float32))
        self._fetch._mujoco_step(command)
        if self._fetch.block_gripper:  # FetchReach's _step_callback, with the joint addresses cached
            self._data.qpos[self._finger_qpos] = 0.0
            mujoco.mj_forward(self._model, self._data)

    def _physics_state(self) -> np.ndarray:
        """[grip_pos, gripper_state, grip_velp, gripper_vel]: FetchReach's ``_get_obs()["observation"]``."""
        data = self._data
        jacp = np.zeros((3, self._model.nv))
        mujoco.mj_jacSite(self._model, data, jacp, None, self._grip_site)
        grip_velp = (jacp @ data.qvel) * self._dt_s
        gripper_vel = data.qvel[self._gripper_qvel] * self._dt_s
        return np.concatenate((data.site_xpos[self._grip_site], data.qpos[self._gripper_qpos], grip_velp, gripper_vel))

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


def _gymnasium_robotics_version() -> str:
    import gymnasium_robotics

    return str(getattr(gymnasium_robotics, "__version__", "unknown"))

"""The robot's safety filter inside a training env: the policy learns the motion the cell will let it make.

On the simulated push cell the runtime's workspace barrier (``deploy.runtime.safety.filter_action``) cut 55% of a
push policy's commands and its success fell from 84% in pure simulation to 8% (docs/guides/push-on-the-robot.md):
the barrier plans with twice the spec's gain bound and the commands in flight, so a gripper that sweeps toward the
table's near edge at full speed is slowed from about 15 cm away, and a policy trained without it lands its pushes
late. Without the barrier (a box far outside the table) the same policy scored the same on the robot as in
simulation, episode for episode. So the barrier belongs to the task the policy is trained on.

``SafetyShield(env, limits)`` sits outside ``envs.action_delay.ActionDelay`` (and inside ``envs.with_snapshots``):
each proposed command goes through ``filter_action`` with the true gripper position (the observation's first
``limits.position_dims`` values) and the displacement still owed by the commands sent, as the runtime's
``CommandLine`` counts it (the ``delay`` commands in flight and the newest applied, which the arm may lag); the
filtered command is what the delay line carries and what the observation's action history shows, as on the robot.
The learner still scores its own proposal (the filter is part of the env's dynamics, as the arm's gain is). It
plans from the true position: the runtime's position bound, which widens while motion goes unconfirmed, is not
modelled.

``info["shield_cut"]`` is True on a step whose command the filter changed. Episode state (the commands sent, the
previous command, the last position) is carried by snapshots.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from deploy.contract import in_flight_displacement_m
from deploy.runtime.safety import SafetyLimits, filter_action
from envs.action_delay import GOAL_OBS_KEY

SHIELD_CUT_KEY = "shield_cut"  # info key: the filter changed this step's command


class SafetyShield(gym.Wrapper):
    """Runs each command through the robot's safety filter before the delay line (see the module docstring).

    :param env: an ``ActionDelay``-wrapped env (its ``delay`` attribute: control steps) whose observation (a goal
        env's ``observation`` entry or a 1-D vector) starts with the gripper position in metres.
    :param limits: the filter's limits, e.g. ``SafetyLimits.from_spec(spec, contract)`` for the cell the policy is
        trained for.
    """

    def __init__(self, env: gym.Env, limits: SafetyLimits) -> None:
        super().__init__(env)
        if not isinstance(getattr(env, "delay", None), int):
            raise ValueError(
                "SafetyShield wraps an ActionDelay env (it counts the commands in flight by its delay): "
                "SafetyShield(ActionDelay(env, delay=k), limits)"
            )
        self.limits = limits
        self._dims = limits.position_dims
        self._size = int(np.prod(env.action_space.shape))
        self._sent: deque[np.ndarray] = deque()  # commands sent, newest last: delay in flight + the newest applied
        self._previous = np.zeros(self._size)  # the command sent last step (the rate limit's reference)
        self._position = np.zeros(self._dims)  # the gripper position in the last observation (metres)

    def _read_position(self, obs: Any) -> None:
        state = obs[GOAL_OBS_KEY] if isinstance(obs, dict) else obs
        self._position = np.asarray(state[: self._dims], dtype=np.float64).copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._sent = deque(maxlen=self.env.delay + 1)
        self._previous = np.zeros(self._size)
        self._read_position(obs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        proposed = np.asarray(action, dtype=np.float64).reshape(-1)
        sent = np.asarray(self._sent).reshape(-1, self._size)
        owed = in_flight_displacement_m(sent, self.limits.action_scale_m, self._dims)
        result = filter_action(self._position, owed, proposed, self._previous, 0.0, self.limits)
        command = result.action
        self._sent.append(command)
        self._previous = command
        obs, reward, terminated, truncated, info = self.env.step(command)
        self._read_position(obs)
        return obs, reward, terminated, truncated, {**info, SHIELD_CUT_KEY: bool(result.reasons)}

    # Episode state (captured by envs.with_snapshots) ---------------------------------------------------------
    def get_episode_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.asarray(self._sent).reshape(-1, self._size).copy(), self._previous.copy(), self._position.copy()

    def set_episode_state(self, state: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        sent, previous, position = state
        self._sent = deque((row.copy() for row in np.asarray(sent)), maxlen=self.env.delay + 1)
        self._previous = np.asarray(previous, dtype=np.float64).copy()
        self._position = np.asarray(position, dtype=np.float64).copy()

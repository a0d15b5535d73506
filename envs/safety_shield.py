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
The learner still scores its own proposal (the filter is part of the env's dynamics, as the arm's gain is). With
a ``bound`` (``envs.checked_bound.CheckedBound``, as ``make_delayed_fetch(safety_spec=...)`` builds it) the filter
plans from the runtime's own position bound, reckoned from the true positions and the commands applied: a moving
arm's is centimetres wide, so the barrier brakes earlier than from the bare position. With it the shield predicts
the push cell: the shipped package 91% behind it and 91% on the cell, the same outcome in 96 of 100 episodes (from
the bare position: 88%, 93 of 100); a package cloned from the over-the-block push 66% behind it and 65% on the
cell, 89 of 100 (from the bare position: 92%, 73 of 100). Not modelled: the runtime's stop of an arm that does not
follow (the two-arm cell's shield models it, ``envs.cell_shield``).

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
from envs.checked_bound import CheckedBound

SHIELD_CUT_KEY = "shield_cut"  # info key: the filter changed this step's command


class SafetyShield(gym.Wrapper):
    """Runs each command through the robot's safety filter before the delay line (see the module docstring).

    :param env: an ``ActionDelay``-wrapped env (its ``delay`` attribute: control steps) whose observation (a goal
        env's ``observation`` entry or a 1-D vector) starts with the gripper position in metres.
    :param limits: the filter's limits, e.g. ``SafetyLimits.from_spec(spec, contract)`` for the cell the policy is
        trained for.
    :param bound: the runtime's position bound, reckoned from the true positions (``CheckedBound(spec, ...)``):
        the filter plans from it, as the runtime does; None plans from the bare position.
    """

    def __init__(self, env: gym.Env, limits: SafetyLimits, bound: CheckedBound | None = None) -> None:
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
        self.bound = bound

    def _read_position(self, obs: Any) -> None:
        state = obs[GOAL_OBS_KEY] if isinstance(obs, dict) else obs
        self._position = np.asarray(state[: self._dims], dtype=np.float64).copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._sent = deque(maxlen=self.env.delay + 1)
        self._previous = np.zeros(self._size)
        self._read_position(obs)
        if self.bound is not None:
            self.bound.reset(self._position)
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        proposed = np.asarray(action, dtype=np.float64).reshape(-1)
        sent = np.asarray(self._sent).reshape(-1, self._size)
        owed = in_flight_displacement_m(sent, self.limits.action_scale_m, self._dims)
        bounds = None if self.bound is None else self.bound.bounds
        result = filter_action(self._position, owed, proposed, self._previous, 0.0, self.limits, bounds)
        command = result.action
        self._sent.append(command)
        self._previous = command
        obs, reward, terminated, truncated, info = self.env.step(command)
        self._read_position(obs)
        if self.bound is not None:  # the command that acted in this step: the oldest once the line is full
            applied = self._sent[0] if len(self._sent) == self.env.delay + 1 else np.zeros(self._size)
            self.bound.update(self._position, applied)
        return obs, reward, terminated, truncated, {**info, SHIELD_CUT_KEY: bool(result.reasons)}

    # Episode state (captured by envs.with_snapshots) ---------------------------------------------------------
    def get_episode_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
        sent = np.asarray(self._sent).reshape(-1, self._size).copy()
        bound = None if self.bound is None else self.bound.get_state()
        return sent, self._previous.copy(), self._position.copy(), bound

    def set_episode_state(self, state: tuple[np.ndarray, np.ndarray, np.ndarray, Any]) -> None:
        sent, previous, position, bound = state
        self._sent = deque((row.copy() for row in np.asarray(sent)), maxlen=self.env.delay + 1)
        self._previous = np.asarray(previous, dtype=np.float64).copy()
        self._position = np.asarray(position, dtype=np.float64).copy()
        if self.bound is not None:
            self.bound.set_state(bound)

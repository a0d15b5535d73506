"""Actuation delay for any gymnasium env with a Box action space: commands take effect ``k`` control steps late.

The command sent at step t reaches the wrapped env at step t + k (``deploy.contract.apply_delay``, the function the
delayed tasks and the robot runtime share); before the first k steps of an episode the hold command (zeros) is
applied. ``k`` is fixed or drawn per episode from ``delay_range`` (inclusive) with the env's own ``np_random``, so one
RNG state describes the episode. The observation carries the pending commands, which makes the delayed problem
Markov again: the last ``max(delay_range)`` commands sent, oldest first (``deploy.contract.ActionHistory``),
appended to ``observation`` for goal envs (Dict observations) or to the vector for Box observations.

The delay line is episode state: ``envs.with_snapshots`` (applied outside this wrapper) captures and restores it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from deploy.contract import ActionHistory, apply_delay
from envs.delayed_goal_env import check_delay_range
from envs.snapshots import SnapshotWrapper

GOAL_OBS_KEY = "observation"  # the robot-state entry of a goal env's Dict observation


def _with_history(box: spaces.Box, action_space: spaces.Box, history_len: int) -> spaces.Box:
    """``box`` (1-D) extended by ``history_len`` commands within the action bounds."""
    if len(box.shape) != 1:
        raise ValueError(f"ActionDelay appends to 1-D observations, got shape {box.shape}")
    low = np.concatenate([box.low, np.tile(action_space.low.reshape(-1), history_len)]).astype(box.dtype)
    high = np.concatenate([box.high, np.tile(action_space.high.reshape(-1), history_len)]).astype(box.dtype)
    return spaces.Box(low, high, dtype=box.dtype)


class ActionDelay(gym.Wrapper):
    """Delays every command by ``delay`` control steps and shows the pending ones (see the module docstring).

    :param env: an env with a 1-D Box action space and a 1-D Box observation or a goal env's Dict observation.
    :param delay: fixed delay in control steps (used when ``delay_range`` is None).
    :param delay_range: inclusive per-episode delay range in control steps; (k, k) is a fixed delay.
    """

    def __init__(self, env: gym.Env, delay: int = 1, delay_range: tuple[int, int] | None = None) -> None:
        lo, hi = check_delay_range(delay_range if delay_range is not None else (delay, delay))
        space = env.action_space
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"ActionDelay needs a 1-D Box action space, got {space}")
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ValueError("ActionDelay clips commands to the action bounds, which must be finite")
        inner = env
        while isinstance(inner, gym.Wrapper):
            if isinstance(inner, SnapshotWrapper):
                raise ValueError(
                    "apply ActionDelay inside with_snapshots (with_snapshots(ActionDelay(env))), so that "
                    "snapshots carry the commands in flight"
                )
            inner = inner.env
        super().__init__(env)
        self.delay_range = (lo, hi)
        self.delay = hi
        self.history = ActionHistory(hi, space.shape[0])
        self._low, self._high = space.low.astype(np.float64), space.high.astype(np.float64)
        obs_space = env.observation_space
        if isinstance(obs_space, spaces.Dict) and GOAL_OBS_KEY in obs_space.spaces:
            entries = dict(obs_space.spaces)
            entries[GOAL_OBS_KEY] = _with_history(obs_space[GOAL_OBS_KEY], space, hi)
            self.observation_space = spaces.Dict(entries)
        elif isinstance(obs_space, spaces.Box):
            self.observation_space = _with_history(obs_space, space, hi)
        else:
            raise ValueError(
                f"ActionDelay appends the pending commands to a Box observation or to a goal env's "
                f"'{GOAL_OBS_KEY}' entry; got {obs_space}"
            )

    def _observation(self, obs: Any) -> Any:
        if isinstance(obs, dict):
            inner = obs[GOAL_OBS_KEY]
            return {**obs, GOAL_OBS_KEY: np.concatenate([inner, self.history.flat().astype(inner.dtype)])}
        return np.concatenate([obs, self.history.flat().astype(obs.dtype)])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.history.clear()
        lo, hi = self.delay_range
        self.delay = int(self.np_random.integers(lo, hi + 1)) if lo < hi else hi
        return self._observation(obs), {**info, "delay": self.delay}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        action = np.asarray(action, dtype=np.float64)
        if action.shape != self._low.shape:
            raise ValueError(f"action must have shape {self._low.shape}, got {action.shape}")
        if not np.isfinite(action).all():
            raise ValueError(f"action contains NaN or inf: {action}")
        command = np.minimum(np.maximum(action, self._low), self._high)
        applied = apply_delay(self.history, command, self.delay)
        obs, reward, terminated, truncated, info = self.env.step(applied.astype(self.env.action_space.dtype))
        return self._observation(obs), reward, terminated, truncated, {**info, "delay": self.delay}

    # Episode state (captured by envs.with_snapshots) ---------------------------------------------------------
    def get_episode_state(self) -> tuple[np.ndarray, int]:
        return self.history.get_state(), self.delay

    def set_episode_state(self, state: tuple[np.ndarray, int]) -> None:
        history, delay = state
        self.history.set_state(history)
        self.delay = int(delay)

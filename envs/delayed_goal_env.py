"""A goal env whose commands take effect ``k`` control steps late, with snapshot/restore for group resets.

Subclasses supply the physics (a MuJoCo FetchReach or a numpy point mass); this base owns everything the
delay, the contract and the group reset need, so both envs behave identically:

- delay: the command sent at step t is applied at step t + k (``deploy.contract.apply_delay``); ``k`` is
  fixed or drawn per episode from ``delay_range`` (inclusive); the observation carries the last
  ``contract.history_len`` commands sent (the contract's action history, oldest first), normally
  ``max(delay_range)``. A contract with a shorter history models a robot whose delay grew after the policy was
  trained (the policy then does not see every command in flight); a longer one is fine;
- actuator gain: ``action_gain`` scales the applied command (1.0 = exact; 1.1 = the arm moves 10% too far),
  another way a real robot differs from the one the policy learned on;
- observation noise: Gaussian, ``obs_noise_std_m`` metres per axis, added to the measured gripper position in
  ``observation`` (and ``achieved_goal`` when the goal is the gripper's: the same draw in both); a subclass adds the
  noise of its other sensors (a block tracker) in ``_sense``. ``achieved_goal`` is the state's
  ``contract.achieved_slice`` (the block's position in a push task). Rewards and ``is_success`` are computed from
  the *returned* ``achieved_goal``, so ``compute_reward`` on a stored transition reproduces its reward exactly;
- snapshot: ``snapshot()`` captures physics, goal, action history, delay, step count, RNG state and the last
  observation returned; ``reset(options={"snapshot": s})`` restores it and returns that observation (no new noise
  draw), so the same actions give bit-identical observations, rewards and infos to those after the snapshot.

Hot path: ``step`` validates only the action (shape, finite); everything else was checked at construction, so
the per-step work is a handful of numpy calls on cached slices and constants (see benchmarks/env_throughput.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from deploy.contract import MAX_DELAY_STEPS, ActionHistory, ObservationContract, apply_delay
from envs.snapshots import NEW_EPISODE_OPTION, SNAPSHOT_OPTION

MIN_ACTION_GAIN, MAX_ACTION_GAIN = 0.5, 1.5


def check_delay_range(delay_range: tuple[int, int]) -> tuple[int, int]:
    """Validate an inclusive actuation delay range in control steps; return it as two ints."""
    lo, hi = int(delay_range[0]), int(delay_range[1])
    if not 0 <= lo <= hi <= MAX_DELAY_STEPS:
        raise ValueError(
            f"delay_range must satisfy 0 <= low <= high <= {MAX_DELAY_STEPS} control steps, got {tuple(delay_range)} "
            "(a fixed delay k is the range (k, k))"
        )
    return lo, hi


@dataclass
class EnvSnapshot:
    """Everything needed to replay an episode bit for bit from this point (picklable for SubprocVecEnv)."""

    physics: Any
    goal: np.ndarray
    history: np.ndarray
    delay: int
    elapsed_steps: int
    rng_state: dict[str, Any]
    observation: dict[str, np.ndarray] | None = None  # what the env last returned (None before the first reset)


def goal_distance(achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
    """Euclidean distance over the last axis, metres; bit-identical to ``np.linalg.norm(a - d, axis=-1)``.

    Written out (norm's own code path for ``axis=-1``) because the per-step reward calls it on 3-vectors, where
    norm's argument handling costs more than the arithmetic.
    """
    diff = np.asarray(achieved_goal) - np.asarray(desired_goal)
    if not issubclass(diff.dtype.type, np.inexact):
        diff = diff.astype(float)
    return np.sqrt(np.add.reduce(diff * diff, axis=-1))


class DelayedGoalEnv(gym.Env):
    """Base class. Subclasses implement the ``_physics_*`` hooks and ``_sample_goal``.

    :param contract: observation/action contract; its ``history_len`` is normally ``max(delay_range)``.
    :param delay_range: inclusive range of the actuation delay in control steps; (k, k) for a fixed delay.
    :param obs_noise_std_m: std of the Gaussian noise on the measured position, metres (scalar or 3 values).
    :param distance_threshold: success radius around the goal, metres.
    :param max_episode_steps: episode length in control steps (truncation, handled here so snapshots
        restore it too).
    :param reward_type: "sparse" (-1 until within ``distance_threshold``, then 0) or "dense" (-distance).
    :param action_gain: multiplies the applied command (actuator gain error; 1.0 = none).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        contract: ObservationContract,
        delay_range: tuple[int, int],
        obs_noise_std_m: float | tuple[float, float, float] = 0.0,
        distance_threshold: float = 0.05,
        max_episode_steps: int = 50,
        reward_type: str = "sparse",
        action_gain: float = 1.0,
    ) -> None:
        lo, hi = check_delay_range(delay_range)
        if not MIN_ACTION_GAIN <= action_gain <= MAX_ACTION_GAIN:
            raise ValueError(f"action_gain must be in [{MIN_ACTION_GAIN}, {MAX_ACTION_GAIN}], got {action_gain}")
        if distance_threshold <= 0:
            raise ValueError(f"distance_threshold must be > 0 metres, got {distance_threshold}")
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
        if reward_type not in ("sparse", "dense"):
            raise ValueError(f"reward_type must be 'sparse' or 'dense', got {reward_type!r}")
        noise = np.broadcast_to(np.asarray(obs_noise_std_m, dtype=np.float64), (contract.goal_dim,)).copy()
        if np.any(noise < 0) or not np.all(np.isfinite(noise)):
            raise ValueError(f"obs_noise_std_m must be finite and >= 0 metres, got {obs_noise_std_m}")

        self.contract = contract
        self.delay_range = (lo, hi)
        self.obs_noise_std_m = noise
        self.distance_threshold = float(distance_threshold)
        self.max_episode_steps = int(max_episode_steps)
        self.reward_type = reward_type
        # The delay line holds every command that may still be in flight; the observation shows its last
        # ``history_len`` rows (all of it when history_len >= max delay, the normal case).
        self.history = ActionHistory(max(hi, contract.history_len), contract.action_dim)
        self._observed_history = contract.history_len * contract.action_dim
        self.action_gain = float(action_gain)
        self.delay = hi
        self.elapsed_steps = 0
        self.goal = np.zeros(contract.goal_dim)
        self._last_obs: dict[str, np.ndarray] | None = None
        # Constants of the hot path, computed once.
        self._action_shape = (contract.action_dim,)
        self._action_low = float(contract.action_low)
        self._action_high = float(contract.action_high)
        self._pos = slice(*contract.position_slice)
        self._achieved = slice(*contract.achieved_slice)
        self._noisy = bool(np.any(noise > 0))
        self._sparse = reward_type == "sparse"

        self.action_space = spaces.Box(
            contract.action_low, contract.action_high, shape=(contract.action_dim,), dtype=np.float32
        )
        goal_space = spaces.Box(-np.inf, np.inf, shape=(contract.goal_dim,), dtype=np.float64)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, shape=(contract.observation_dim,), dtype=np.float64),
                "achieved_goal": goal_space,
                "desired_goal": goal_space,
            }
        )

    # Physics hooks -------------------------------------------------------------------------------------
    def _physics_reset(self) -> None:
        raise NotImplementedError

    def _physics_apply(self, command: np.ndarray) -> None:
        """Advance one control step with ``command`` (already clipped, float64)."""
        raise NotImplementedError

    def _physics_state(self) -> np.ndarray:
        """The true robot state vector in the contract's field order: a new array the caller may modify."""
        raise NotImplementedError

    def _physics_get(self) -> Any:
        raise NotImplementedError

    def _physics_set(self, physics: Any) -> None:
        raise NotImplementedError

    def _sample_goal(self) -> np.ndarray:
        raise NotImplementedError

    def _sense(self, state: np.ndarray) -> None:
        """Turn the true state into what the robot's other sensors report, in place (default: nothing more than the
        gripper noise). Called once per observation, after the gripper noise."""

    # Gymnasium API -------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        snapshot = (options or {}).get(SNAPSHOT_OPTION)
        if snapshot is not None:
            observation = self._restore(snapshot)
            if (options or {}).get(NEW_EPISODE_OPTION):  # the state starts a new episode: the whole length ahead
                self.elapsed_steps = 0
            return observation, {"delay": self.delay}
        self._physics_reset()
        self.history.clear()
        lo, hi = self.delay_range
        self.delay = int(self.np_random.integers(lo, hi + 1)) if lo < hi else hi
        self.elapsed_steps = 0
        self.goal = np.asarray(self._sample_goal(), dtype=np.float64).copy()
        return self._observe(), {"delay": self.delay}

    def step(self, action: np.ndarray):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != self._action_shape:
            raise ValueError(f"action must have shape {self._action_shape}, got {action.shape}")
        # A finite sum implies finite entries; only a non-finite sum needs the per-entry check.
        if not math.isfinite(action.sum()) and not np.isfinite(action).all():
            raise ValueError(f"action contains NaN or inf: {action}")
        command = np.minimum(np.maximum(action, self._action_low), self._action_high)  # == contract.clip_action
        applied = apply_delay(self.history, command, self.delay)
        self._physics_apply(applied if self.action_gain == 1.0 else applied * self.action_gain)
        self.elapsed_steps += 1
        obs = self._observe()
        distance = goal_distance(obs["achieved_goal"], self.goal)
        info = {"is_success": np.float32(distance < self.distance_threshold), "delay": self.delay}
        if self._sparse:  # the same values compute_reward gives: -1.0, or -0.0 on success
            reward = -1.0 if distance > self.distance_threshold else -0.0
        else:
            reward = float(-np.float32(distance))
        truncated = self.elapsed_steps >= self.max_episode_steps
        return obs, reward, False, truncated, info

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """Vectorized over leading batch axes (float32, one value per goal pair); equals the per-step reward."""
        distance = goal_distance(achieved_goal, desired_goal)
        if self._sparse:
            return -(distance > self.distance_threshold).astype(np.float32)
        return -distance.astype(np.float32)

    def _observe(self) -> dict[str, np.ndarray]:
        """Build the observation (as ``contract.build`` does, without its per-call checks) and remember it."""
        state = self._physics_state()
        if self._noisy:
            state[self._pos] += self.np_random.normal(0.0, self.obs_noise_std_m)
        self._sense(state)
        obs = {
            "observation": np.concatenate((state, self._history_observed())),
            "achieved_goal": state[self._achieved].copy(),
            "desired_goal": self.goal.copy(),
        }
        self._last_obs = obs
        return obs

    def _history_observed(self) -> np.ndarray:
        flat = self.history.flat()
        if flat.size == self._observed_history:
            return flat
        return flat[flat.size - self._observed_history :]

    # Snapshot / restore ------------------------------------------------------------------------------
    def snapshot(self) -> EnvSnapshot:
        """Capture the full state; ``reset(options={"snapshot": s})`` restores it."""
        return EnvSnapshot(
            physics=self._physics_get(),
            goal=self.goal.copy(),
            history=self.history.get_state(),
            delay=self.delay,
            elapsed_steps=self.elapsed_steps,
            rng_state=self.np_random.bit_generator.state,
            observation=None if self._last_obs is None else {k: v.copy() for k, v in self._last_obs.items()},
        )

    def _restore(self, snapshot: EnvSnapshot) -> dict[str, np.ndarray]:
        """Restore ``snapshot``; return the observation the env returned when it was taken."""
        if not isinstance(snapshot, EnvSnapshot):
            raise TypeError(f"options['snapshot'] must be an EnvSnapshot from env.snapshot(), got {type(snapshot)}")
        self.history.set_state(snapshot.history)  # first: it checks the layout before anything is overwritten
        self._physics_set(snapshot.physics)
        self.goal = snapshot.goal.copy()
        self.delay = snapshot.delay
        self.elapsed_steps = snapshot.elapsed_steps
        self.np_random.bit_generator.state = snapshot.rng_state
        if snapshot.observation is None:
            return self._observe()
        self._last_obs = {k: v.copy() for k, v in snapshot.observation.items()}
        return {k: v.copy() for k, v in self._last_obs.items()}

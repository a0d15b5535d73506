"""A goal env whose commands take effect ``k`` control steps late, with snapshot/restore for group resets.

Subclasses supply the physics (a MuJoCo FetchReach or a numpy point mass); this base owns everything the
delay, the contract and the group reset need, so both envs behave identically:

- delay: the command sent at step t is applied at step t + k (``deploy.contract.apply_delay``); ``k`` is
  fixed or drawn per episode from ``delay_range`` (inclusive); the observation carries the last
  ``max(delay_range)`` commands sent (the contract's action history, oldest first);
- observation noise: Gaussian, ``obs_noise_std_m`` metres per axis, added to the measured position in
  ``observation`` and ``achieved_goal`` (the same draw in both). Rewards and ``is_success`` are computed from
  the *returned* ``achieved_goal``, so ``compute_reward`` on a stored transition reproduces its reward exactly;
- snapshot: ``snapshot()`` captures physics, goal, action history, delay, step count and RNG state;
  ``reset(options={"snapshot": s})`` restores it, so the same actions give bit-identical observations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from deploy.contract import ActionHistory, ObservationContract, apply_delay


@dataclass
class EnvSnapshot:
    """Everything needed to replay an episode bit for bit from this point (picklable for SubprocVecEnv)."""

    physics: Any
    goal: np.ndarray
    history: np.ndarray
    delay: int
    elapsed_steps: int
    rng_state: dict[str, Any]


class DelayedGoalEnv(gym.Env):
    """Base class. Subclasses implement the ``_physics_*`` hooks and ``_sample_goal``.

    :param contract: observation/action contract (its ``history_len`` must equal ``max(delay_range)``).
    :param delay_range: inclusive range of the actuation delay in control steps; (k, k) for a fixed delay.
    :param obs_noise_std_m: std of the Gaussian noise on the measured position, metres (scalar or 3 values).
    :param distance_threshold: success radius around the goal, metres.
    :param max_episode_steps: episode length in control steps (truncation, handled here so snapshots
        restore it too).
    :param reward_type: "sparse" (-1 until within ``distance_threshold``, then 0) or "dense" (-distance).
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
    ) -> None:
        lo, hi = int(delay_range[0]), int(delay_range[1])
        if not 0 <= lo <= hi <= 8:
            raise ValueError(f"delay_range must satisfy 0 <= low <= high <= 8 control steps, got {delay_range}")
        if contract.history_len != hi:
            raise ValueError(f"contract history_len {contract.history_len} must equal max delay {hi}")
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
        self.history = ActionHistory(contract.history_len, contract.action_dim)
        self.delay = hi
        self.elapsed_steps = 0
        self.goal = np.zeros(contract.goal_dim)

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
        """The true robot state vector in the contract's field order."""
        raise NotImplementedError

    def _physics_get(self) -> Any:
        raise NotImplementedError

    def _physics_set(self, physics: Any) -> None:
        raise NotImplementedError

    def _sample_goal(self) -> np.ndarray:
        raise NotImplementedError

    # Gymnasium API -------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        snapshot = (options or {}).get("snapshot")
        if snapshot is not None:
            self._restore(snapshot)
        else:
            self._physics_reset()
            self.history.clear()
            lo, hi = self.delay_range
            self.delay = int(self.np_random.integers(lo, hi + 1)) if lo < hi else hi
            self.elapsed_steps = 0
            self.goal = np.asarray(self._sample_goal(), dtype=np.float64).copy()
        return self._observe(), {"delay": self.delay}

    def step(self, action: np.ndarray):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action must have shape {self.action_space.shape}, got {action.shape}")
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action contains NaN or inf: {action}")
        command = self.contract.clip_action(action)
        applied = apply_delay(self.history, command, self.delay)
        self._physics_apply(applied)
        self.elapsed_steps += 1
        obs = self._observe()
        info = {"is_success": self._is_success(obs["achieved_goal"], self.goal), "delay": self.delay}
        reward = float(self.compute_reward(obs["achieved_goal"], self.goal, info))
        truncated = self.elapsed_steps >= self.max_episode_steps
        return obs, reward, False, truncated, info

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """Vectorized over a leading batch axis; equals the per-step reward exactly."""
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        if self.reward_type == "sparse":
            return -(distance > self.distance_threshold).astype(np.float32)
        return -distance.astype(np.float32)

    def _is_success(self, achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.float32:
        return np.float32(np.linalg.norm(achieved_goal - desired_goal, axis=-1) < self.distance_threshold)

    def _observe(self) -> dict[str, np.ndarray]:
        state = self._physics_state().copy()
        pos = slice(*self.contract.position_slice)
        if np.any(self.obs_noise_std_m > 0):
            state[pos] += self.np_random.normal(0.0, self.obs_noise_std_m)
        return self.contract.build(state, self.history, self.goal)

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
        )

    def _restore(self, snapshot: EnvSnapshot) -> None:
        if not isinstance(snapshot, EnvSnapshot):
            raise TypeError(f"options['snapshot'] must be an EnvSnapshot from env.snapshot(), got {type(snapshot)}")
        self._physics_set(snapshot.physics)
        self.goal = snapshot.goal.copy()
        self.history.set_state(snapshot.history)
        self.delay = snapshot.delay
        self.elapsed_steps = snapshot.elapsed_steps
        self.np_random.bit_generator.state = snapshot.rng_state

"""A DummyVecEnv whose ``step`` runs its envs in a few threads: for envs that release the GIL while simulating.

MuJoCo releases the GIL inside ``mj_step`` (``benchmarks/env_throughput.py``: 16 Fetch envs on 2 threads step
1.92x as fast as on one), so on a machine with spare cores one process can step a group rollout's envs in
parallel without SubprocVecEnv's pickling and pipes. Everything except ``step`` (reset, seeding, ``env_method``,
``get_attr``: what GRPO's group reset uses) is DummyVecEnv's, sequential and in the caller's thread.

Each thread steps a fixed, contiguous slice of the envs and writes only that slice of the shared buffers, so the
result is bit-identical to DummyVecEnv's for deterministic envs (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn


class ThreadedVecEnv(DummyVecEnv):
    """Step ``len(env_fns)`` envs in ``n_threads`` threads (pass as ``make_vec_env(..., vec_env_cls=...)``).

    :param env_fns: functions that create the envs.
    :param n_threads: worker threads (at most the number of envs; 1 behaves like DummyVecEnv).
    """

    def __init__(self, env_fns: list[Callable[[], gym.Env]], n_threads: int = 2) -> None:
        if n_threads < 1:
            raise ValueError(f"n_threads must be >= 1, got {n_threads}")
        super().__init__(env_fns)
        self.n_threads = min(n_threads, self.num_envs)
        self._slices: Sequence[np.ndarray] = np.array_split(np.arange(self.num_envs), self.n_threads)
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(self.n_threads, thread_name_prefix="vec_env")

    def step_wait(self) -> VecEnvStepReturn:
        if self._pool is None:
            raise RuntimeError("step() on a closed ThreadedVecEnv")
        list(self._pool.map(self._step_slice, self._slices))  # waits for all; re-raises a worker's exception
        return self._obs_from_buf(), np.copy(self.buf_rews), np.copy(self.buf_dones), deepcopy(self.buf_infos)

    def _step_slice(self, indices: np.ndarray) -> None:
        for i in indices:
            self._step_env(int(i))

    def _step_env(self, i: int) -> None:
        """One env's step in SB3's VecEnv convention: done = terminated or truncated, auto-reset on done."""
        obs, reward, terminated, truncated, info = self.envs[i].step(self.actions[i])
        done = terminated or truncated
        info["TimeLimit.truncated"] = truncated and not terminated
        if done:
            info["terminal_observation"] = obs
            obs, self.reset_infos[i] = self.envs[i].reset()
        self.buf_rews[i], self.buf_dones[i], self.buf_infos[i] = reward, done, info
        self._save_obs(i, obs)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        super().close()

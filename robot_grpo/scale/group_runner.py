"""Run one whole group on a few local envs: the unit of work of a rollout worker (no Ray here).

A :class:`GroupRunner` owns ``group_size`` envs built from an env factory. :meth:`GroupRunner.run` plays group
``group`` of rollout ``update``: the leader is put back to the pristine state captured when the runner was built
(so nothing a previous group left behind leaks into this one, even from an env whose reset is incomplete),
reset with the group's start seed, snapshotted, and every member is restored from that snapshot; then all
members run to the time limit with actions ``mean + noise * std`` from the members' own noise streams
(:mod:`robot_grpo.scale.streams`). The result depends only on (weights, seed, update, group).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch as th

from robot_grpo.buffers import info_reward_offsets
from robot_grpo.group_reset import SNAPSHOT_METHOD, SNAPSHOT_OPTION
from robot_grpo.policies import GoalGaussianPolicy, flatten_obs_np
from robot_grpo.scale.streams import group_noise, group_start_seed

EnvFactory = Callable[[], gym.Env]
PRISTINE_SEED = 0  # seed of the reset whose state every group starts from before its own seeded reset


class GroupRollout(NamedTuple):
    """One group's episodes, laid out as the rollout buffer stores them (T steps, G members)."""

    group: int  # index of the group in its rollout
    observations: np.ndarray  # [T, G, obs_dim] float32 flat observations before each step
    actions: np.ndarray  # [T, G, action_dim] float32 sampled actions (before clipping to the action space)
    rewards: np.ndarray  # [T, G] float32
    reward_offsets: np.ndarray  # [T, G] float32: the goal-independent part of ``rewards`` (info[REWARD_OFFSET_KEY])
    achieved_next: np.ndarray | None  # [T, G, goal_dim] float64 achieved goal after each step (goal envs)
    successes: np.ndarray  # [G] float32 is_success of the last step (empty for envs without it)
    compute_s: float  # wall seconds the worker spent on the group (for the overhead benchmark)


def _stack(observations: list[Any]) -> dict[str, np.ndarray] | np.ndarray:
    if isinstance(observations[0], dict):
        return {k: np.stack([o[k] for o in observations]) for k in observations[0]}
    return np.stack(observations)


def _find_snapshot(env: gym.Env) -> Any:
    """The env's ``snapshot`` method, on the env or one of its wrappers (``envs.with_snapshots``), or None."""
    try:
        return env.get_wrapper_attr(SNAPSHOT_METHOD)
    except AttributeError:
        return None


class GroupRunner:
    """``group_size`` envs from ``env_factory`` that play whole groups.

    :param env_factory: builds one env offering ``snapshot()`` (on the env or a wrapper, as ``envs.with_snapshots``
        adds it) and ``reset(options={"snapshot": s})``.
    :param group_size: members per group (G).
    """

    def __init__(self, env_factory: EnvFactory, group_size: int) -> None:
        if group_size < 2:
            raise ValueError(f"group_size must be >= 2 (the group is the baseline), got {group_size}")
        self.envs = [env_factory() for _ in range(group_size)]
        self.group_size = group_size
        leader = self.envs[0]
        if not callable(_find_snapshot(leader)):
            raise ValueError(
                f"{leader!r} has no snapshot(); distributed group rollouts need the snapshot API (snapshot() on the "
                "env or one of its wrappers, and reset(options={'snapshot': s})). For a MuJoCo gymnasium env, wrap "
                "it with envs.with_snapshots"
            )
        space = leader.action_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"group rollouts need a Box action space, got {space}")
        self.low, self.high = space.low, space.high
        self.action_dim = int(np.prod(space.shape))
        leader.reset(seed=PRISTINE_SEED)
        self._snapshot = _find_snapshot(leader)
        self._pristine = self._snapshot()

    def _start(self, start_seed: int) -> list[Any]:
        """Reset every member to one fresh start drawn with ``start_seed`` from the pristine state."""
        leader = self.envs[0]
        leader.reset(options={SNAPSHOT_OPTION: self._pristine})
        leader.reset(seed=start_seed)
        snapshot = self._snapshot()
        return [env.reset(options={SNAPSHOT_OPTION: snapshot})[0] for env in self.envs]

    @th.no_grad()
    def run(self, policy: GoalGaussianPolicy, seed: int, update: int, group: int, n_steps: int) -> GroupRollout:
        """Play group ``group`` of rollout ``update`` to the time limit ``n_steps`` (control steps)."""
        start = time.perf_counter()
        G, T = self.group_size, n_steps
        obs = _stack(self._start(group_start_seed(seed, update, group)))
        noise = th.as_tensor(group_noise(seed, update, group, G, T, self.action_dim))
        is_goal = isinstance(obs, dict)
        flat0 = flatten_obs_np(obs)
        observations = np.zeros((T, G, flat0.shape[1]), dtype=np.float32)
        actions = np.zeros((T, G, self.action_dim), dtype=np.float32)
        rewards = np.zeros((T, G), dtype=np.float32)
        offsets = np.zeros((T, G), dtype=np.float32)
        achieved = np.zeros((T, G, obs["achieved_goal"].shape[1]), dtype=np.float64) if is_goal else None
        successes: list[float] = []
        for t in range(T):
            flat = flatten_obs_np(obs)
            mean, log_std = policy.distribution_params(th.as_tensor(flat))
            action = (mean + noise[t] * th.exp(log_std)).numpy()
            clipped = np.clip(action, self.low, self.high)
            steps = [env.step(clipped[m]) for m, env in enumerate(self.envs)]
            done = [terminated or truncated for _, _, terminated, truncated, _ in steps]
            if not all(d == (t == T - 1) for d in done):
                raise ValueError(
                    f"episodes must all end exactly at the time limit (n_steps={T}); at step {t + 1} the done flags "
                    f"were {[int(d) for d in done]}. GRPO groups need envs without early termination; "
                    "pass n_steps equal to the env's episode length"
                )
            obs = _stack([s[0] for s in steps])
            observations[t], actions[t] = flat, action
            rewards[t] = [s[1] for s in steps]
            offsets[t] = info_reward_offsets([s[4] for s in steps])
            if achieved is not None:
                achieved[t] = obs["achieved_goal"]
            if t == T - 1:
                successes = [float(s[4]["is_success"]) for s in steps if "is_success" in s[4]]
        return GroupRollout(
            group,
            observations,
            actions,
            rewards,
            offsets,
            achieved,
            np.asarray(successes, dtype=np.float32),
            time.perf_counter() - start,
        )

    def close(self) -> None:
        for env in self.envs:
            env.close()

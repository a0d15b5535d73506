"""Shared pieces of the Ray scale-out tests: a tiny GRPO on PointReach, and an env that kills its worker."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch as th

from deploy.export.rollouts import make_env
from robot_grpo.scale.distributed_grpo import DistributedGRPO
from robot_grpo.scale.pool import RolloutWorkerPool
from robot_grpo.scale.streams import group_start_seed

G, N_GROUPS, EP_STEPS, SEED = 4, 3, 10, 3
UPDATE_STEPS = G * N_GROUPS * EP_STEPS  # env steps of one update
SMALL = {"group_size": G, "n_groups": N_GROUPS, "batch_size": 64, "n_epochs": 2, "policy_kwargs": {"net_arch": [16]}}
POINT_KWARGS = {"max_episode_steps": EP_STEPS}
point_factory = functools.partial(make_env, "PointReach-v0", POINT_KWARGS)


class KillWorkerEnv(gym.Wrapper):
    """PointReach that ends its worker process (``os._exit``) a few steps into one chosen group.

    Armed when its reset seed is the chosen group's start seed (only that group's leader sees it). With a
    ``marker`` file it strikes once (the re-run on another worker finds the marker and plays normally);
    without one it strikes every time.

    :param update: rollout index of the chosen group.
    :param group: group index of the chosen group.
    :param marker: file created when striking; None = strike every time.
    :param at_step: the control step of the episode at which the process ends.
    """

    def __init__(self, update: int, group: int, marker: str | None, at_step: int = 3) -> None:
        super().__init__(make_env("PointReach-v0", POINT_KWARGS))
        self.crash_seed = group_start_seed(SEED, update, group)
        self.marker = None if marker is None else Path(marker)
        self.at_step = at_step
        self._armed, self._t = False, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._armed = seed == self.crash_seed and (self.marker is None or not self.marker.exists())
        self._t = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        self._t += 1
        if self._armed and self._t == self.at_step:
            if self.marker is not None:
                self.marker.touch()
            os._exit(1)  # the worker process dies mid-group, as on a crash or a lost machine
        return self.env.step(action)


def train(n_workers: int, env_factory=point_factory, updates: int = 2, **kwargs) -> DistributedGRPO:
    pool = RolloutWorkerPool(env_factory, G, n_workers)
    try:
        model = DistributedGRPO("MultiInputPolicy", pool, seed=SEED, **SMALL, **kwargs)
        model.learn(updates * UPDATE_STEPS)
    finally:
        pool.shutdown()
    return model


def weights(model: Any) -> dict[str, th.Tensor]:
    return {k: v.detach().clone() for k, v in model.policy.state_dict().items()}


def assert_same_weights(a: dict[str, th.Tensor], b: dict[str, th.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert th.equal(a[key], b[key]), f"{key} differs"

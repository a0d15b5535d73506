"""Mid-episode starts for GRPO's ``restart_fraction``: snapshots of states one rollout reached, started from by some
groups of the next rollout.

One member per group is snapshotted after a random number of control steps (uniform over 1 .. n_steps - 1, so every
part of an episode is covered); the next rollout draws ``round(fraction * n_groups)`` of them without replacement
and ``group_reset`` restarts those groups from them as new episodes (``new_episode``: the whole episode length from
there). A pool is used once: the starts come from the policy one update ago, never older.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from robot_grpo.group_reset import SNAPSHOT_METHOD


class RestartPool:
    """The previous rollout's mid-episode snapshots (not saved with a model: they belong to its env)."""

    def __init__(self) -> None:
        self.snapshots: list[Any] = []
        self.last_drawn = 0  # groups of the last rollout that started from one of them

    def clear(self) -> None:
        """Forget the snapshots (a new env: they cannot be restored into it)."""
        self.snapshots = []

    def draw(self, fraction: float, n_groups: int, rng: np.random.Generator) -> list[Any]:
        """Snapshots for ``round(fraction * n_groups)`` groups (fewer before a rollout filled the pool); the pool is
        emptied."""
        pool, self.snapshots = self.snapshots, []
        wanted = min(round(fraction * n_groups), len(pool))
        picked = rng.choice(len(pool), size=wanted, replace=False) if wanted else []
        self.last_drawn = len(picked)
        return [pool[i] for i in picked]

    @staticmethod
    def capture_step(fraction: float, n_steps: int, rng: np.random.Generator) -> int:
        """After how many control steps this rollout's states are snapshotted (0: not at all)."""
        if fraction == 0 or n_steps < 2:
            return 0
        return int(rng.integers(1, n_steps))

    def capture(self, env: VecEnv, group_size: int, n_groups: int, rng: np.random.Generator) -> None:
        """Snapshot one random member of every group (its state, goal and delay line) for the next rollout."""
        members = [g * group_size + int(rng.integers(group_size)) for g in range(n_groups)]
        self.snapshots = list(env.env_method(SNAPSHOT_METHOD, indices=members))

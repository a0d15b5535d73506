"""Where the control loop's targets come from: a list of goals (metres), one episode each.

An episode = reach one target for ``max_episode_steps`` control steps, starting from the robot's home pose
(the loop sends a HomeMsg carrying the episode's seed). To compare with pure simulation over the same seeded
goals, build the list from the sim env's ``reset(seed=s)`` goals and pass the same seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from deploy.contract import FLOAT32_MAX
from deploy.wire.messages import MAX_SEED


@dataclass(frozen=True)
class Episode:
    """One target: ``goal`` (metres, world frame), the ``seed`` sent with HomeMsg, its ``index`` in the source."""

    index: int
    goal: np.ndarray
    seed: int


class GoalSource:
    """A finite list of targets, served in order.

    :param goals: targets, shape (n, goal_dim), metres.
    :param seeds: one HomeMsg seed per goal (default 0, 1, 2, ...).
    :param workspace: optional (low, high) box (metres); a goal outside it is refused, since the safety filter
        would stop the arm short of it.
    """

    def __init__(
        self,
        goals: Sequence[Sequence[float]] | np.ndarray,
        seeds: Sequence[int] | None = None,
        workspace: tuple[Sequence[float], Sequence[float]] | None = None,
    ) -> None:
        array = np.asarray(goals, dtype=np.float64)
        if array.ndim != 2 or array.shape[0] == 0:
            raise ValueError(f"goals must be a non-empty (n, goal_dim) array of metres, got shape {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError("goals contain NaN or inf")
        if np.any(np.abs(array) > FLOAT32_MAX):
            index = int(np.flatnonzero(np.any(np.abs(array) > FLOAT32_MAX, axis=1))[0])
            raise ValueError(
                f"goal {index} = {array[index].tolist()} m is beyond float32's range: the policy would see inf; "
                "goals are positions in metres"
            )
        if seeds is None:
            seeds = range(array.shape[0])
        seeds = [int(s) for s in seeds]
        if len(seeds) != array.shape[0]:
            raise ValueError(f"got {len(seeds)} seeds for {array.shape[0]} goals; give one seed per goal")
        if any(not 0 <= s <= MAX_SEED for s in seeds):
            raise ValueError(f"seeds must be in 0..{MAX_SEED} (they travel as unsigned 64-bit integers)")
        if workspace is not None:
            low, high = np.asarray(workspace[0], dtype=np.float64), np.asarray(workspace[1], dtype=np.float64)
            outside = np.flatnonzero(np.any((array < low) | (array > high), axis=1))
            if outside.size:
                raise ValueError(
                    f"goal {outside[0]} = {array[outside[0]].tolist()} m lies outside the workspace box "
                    f"{low.tolist()} .. {high.tolist()}; move it inside or recalibrate the workspace"
                )
        self.goals = array
        self.seeds = seeds
        self._next = 0

    @property
    def goal_dim(self) -> int:
        return int(self.goals.shape[1])

    def __len__(self) -> int:
        return int(self.goals.shape[0])

    @property
    def remaining(self) -> int:
        return len(self) - self._next

    def has_next(self) -> bool:
        """Whether ``next`` would give an episode."""
        return self.remaining > 0

    def next(self) -> Episode | None:
        """The next episode, or None when every goal has been served."""
        if self._next >= len(self):
            return None
        index = self._next
        self._next += 1
        return Episode(index, self.goals[index].copy(), self.seeds[index])

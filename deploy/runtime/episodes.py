"""The control loop's episodes: which target is being served, how many policy steps it has taken, the results.

numpy only (robot side). An episode = one target from the ``GoalSource``, ``max_episode_steps`` policy commands
from the home pose; it ends full (success judged by the final distance) or aborted (a safe stop, a robot restart,
the end of the run).
"""

from __future__ import annotations

import numpy as np

from deploy.runtime.goals import Episode, GoalSource
from deploy.runtime.run_report import EpisodeResult


class EpisodeTracker:
    """Serves the goals one episode at a time and records each episode's result.

    :param goals: the targets.
    :param position_slice: where the achieved goal sits in the robot state (the gripper's position, or the block's in
        a push task: the contract's ``achieved_slice``).
    :param success_radius_m: an episode succeeds when its final position is closer than this to the goal (metres).
    :param max_episode_steps: policy commands per episode (control steps).
    """

    def __init__(
        self, goals: GoalSource, position_slice: slice, success_radius_m: float, max_episode_steps: int
    ) -> None:
        self.goals = goals
        self._pos = position_slice
        self.success_radius_m = success_radius_m
        self.max_episode_steps = max_episode_steps
        self.current: Episode | None = None
        self.steps = 0
        self.results: list[EpisodeResult] = []

    @property
    def full(self) -> bool:
        """The current episode has taken all its policy steps."""
        return self.steps >= self.max_episode_steps

    @property
    def ended(self) -> int:
        """Episodes ended so far, served or aborted (a cell arm reports it: ``deploy.cell.report``)."""
        return len(self.results)

    def has_next(self) -> bool:
        """Whether a goal is left (``start_next`` would begin an episode)."""
        return self.goals.has_next()

    def start_next(self) -> Episode | None:
        """Begin the next episode (None when every goal has been served)."""
        self.current = self.goals.next()
        self.steps = 0
        return self.current

    def all_taken(self) -> str:
        """Why the run ends once every goal was taken: all served, or how many were served and aborted ("served"
        would hide that some goals were never reached for: a link failure, a safe stop)."""
        aborted = sum(result.aborted for result in self.results)
        if not aborted:
            return "all goals served"
        served = len(self.results) - aborted
        return f"all goals taken: {served} served, {aborted} aborted (see the episodes' results)"

    def step_taken(self) -> None:
        self.steps += 1

    def abort(self) -> None:
        """End the current episode, if any, as aborted (a safe stop, a robot reset, the end of the run)."""
        self.end(None, aborted=True)

    def end(self, state: np.ndarray | None, aborted: bool, reason: str = "") -> None:
        """Record the current episode's result (``state``: the final robot state; None when aborted; ``reason``: why
        it ended early, e.g. ``block_off_table``)."""
        episode = self.current
        if episode is None:
            return
        distance = float("nan")
        if state is not None:
            distance = float(np.linalg.norm(state[self._pos] - episode.goal))
        success = not aborted and distance < self.success_radius_m
        self.results.append(
            EpisodeResult(episode.index, episode.seed, episode.goal, success, distance, self.steps, aborted, reason)
        )
        self.current = None

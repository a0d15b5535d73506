"""A cell arm's goals, then park episodes at its home until its partner is done too.

numpy only (robot side). Why: an arm's runtime that ends stops sending its position reports, and to its partner a
missing report means hold (``deploy.runtime.separation``: nothing moves beside an arm whose whereabouts are not
known). So an arm that finished its goals before its partner (the partner lost time to a safe stop, or had more
goals) would freeze the partner for good. Instead, once its own goals are served, the arm says so
(``mark_done``) and serves park episodes: its home as the goal, so it stays where it is while its runtime keeps
checking its states and reporting. When the partner is done too (``partner_done``), ``next`` returns None at the
next episode boundary and the runtime ends. Park episodes are numbered after the real ones, so a caller tells them
apart by their index (``is_park``).

The controller reads ``next()``, ``has_next()`` and ``goal_dim`` of its goal source; this class offers them. It ends
its run with no goal left even while the partner is stale (ending moves nothing), so the arm that finishes last
does not wait on a partner that has already gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from deploy.runtime.goals import Episode, GoalSource


class LingeringGoals:
    """The goal source of a cell arm (module docstring).

    :param goals: the arm's own goals (metres, its frame).
    :param park_goal: where it waits once they are served: its home (metres, its frame).
    :param mark_done: called once, as soon as the arm's own goals are all served (asked for, or the next episode
        asked for).
    :param partner_done: whether the partner has served its goals too.
    :param max_park_episodes: park episodes at most; past them the arm ends whatever the partner does (a partner
        that never finishes must not hold this runtime for ever: its own stale reports then hold it anyway).
    """

    def __init__(
        self,
        goals: GoalSource,
        park_goal: Sequence[float],
        mark_done: Callable[[], None],
        partner_done: Callable[[], bool],
        max_park_episodes: int,
    ) -> None:
        park = np.asarray(park_goal, dtype=np.float64)
        if park.shape != (goals.goal_dim,) or not np.all(np.isfinite(park)):
            raise ValueError(f"park_goal must be {goals.goal_dim} finite numbers (metres), got {park_goal!r}")
        if max_park_episodes < 0:
            raise ValueError(f"max_park_episodes must be >= 0, got {max_park_episodes}")
        self.goals = goals
        self.park_goal = park
        self._mark_done = mark_done
        self._partner_done = partner_done
        self.max_park_episodes = int(max_park_episodes)
        self.real_episodes = len(goals)
        self.parked = 0  # park episodes served so far
        self._said_done = False

    @property
    def goal_dim(self) -> int:
        return self.goals.goal_dim

    def is_park(self, index: int) -> bool:
        """Whether episode ``index`` (as the runtime numbered it) was a park episode."""
        return index >= self.real_episodes

    def _own_goals_served(self) -> bool:
        """Whether this arm's own goals are all served; the first time, tell the partner (``mark_done``)."""
        if self.goals.has_next():
            return False
        if not self._said_done:
            self._said_done = True
            self._mark_done()
        return True

    def has_next(self) -> bool:
        """Whether ``next`` would give an episode (a real one, or a park one while the partner is not done)."""
        if not self._own_goals_served():
            return True
        return not self._partner_done() and self.parked < self.max_park_episodes

    def next(self) -> Episode | None:
        """The next real goal; then a park episode while the partner is not done; then None."""
        episode = self.goals.next()
        if episode is not None:
            return episode
        if not self.has_next():
            return None
        index = self.real_episodes + self.parked
        self.parked += 1
        return Episode(index, self.park_goal.copy(), index)

"""A cell arm's goal source: its own goals, then park episodes at its home while the partner is not done."""

from __future__ import annotations

import numpy as np
import pytest

from deploy.cell.lingering_goals import LingeringGoals
from deploy.runtime.goals import GoalSource

HOME = (1.34, 0.75, 0.53)


def lingering(n_goals: int, partner: list[bool], said: list[str], max_park: int = 5) -> LingeringGoals:
    goals = GoalSource(np.full((n_goals, 3), 0.5))
    return LingeringGoals(goals, HOME, lambda: said.append("done"), lambda: partner[0], max_park)


def test_own_goals_first_then_park_at_home_until_the_partner_is_done() -> None:
    partner, said = [False], []
    source = lingering(2, partner, said)
    assert [source.next().index for _ in range(2)] == [0, 1] and said == []
    park = source.next()
    assert said == ["done"]  # told the partner the moment its own goals were served
    assert park.index == 2 and source.is_park(2) and not source.is_park(1)
    np.testing.assert_array_equal(park.goal, HOME)
    assert source.next().index == 3 and source.parked == 2
    partner[0] = True
    assert not source.has_next() and source.next() is None
    assert said == ["done"]  # said once


def test_the_partner_already_done_means_no_park_episode() -> None:
    said: list[str] = []
    source = lingering(1, [True], said)
    assert source.next().index == 0 and source.has_next() is False and source.next() is None
    assert said == ["done"] and source.parked == 0


def test_asking_whether_a_goal_is_left_tells_the_partner_too() -> None:
    # the controller asks has_next() when its partner is stale (it may then end the run without a HOME): the
    # partner must learn this arm is done even if next() is never called again
    said: list[str] = []
    source = lingering(1, [False], said)
    source.next()
    assert source.has_next() and said == ["done"]


def test_a_partner_that_never_finishes_holds_the_arm_for_max_park_episodes_only() -> None:
    source = lingering(1, [False], [], max_park=3)
    indices = [e.index for e in iter(source.next, None)]
    assert indices == [0, 1, 2, 3] and source.parked == 3


@pytest.mark.parametrize(("park_goal", "max_park"), [((1.0, 2.0), 5), ((1.0, float("nan"), 0.0), 5), (HOME, -1)])
def test_bad_settings_are_refused(park_goal, max_park) -> None:
    with pytest.raises(ValueError, match="park_goal|max_park_episodes"):
        LingeringGoals(GoalSource(np.zeros((1, 3))), park_goal, lambda: None, lambda: False, max_park)

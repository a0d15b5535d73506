"""GoalSource refuses what the loop could not serve, before the robot moves, with a message that says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from deploy.runtime.goals import GoalSource
from deploy.wire.messages import MAX_SEED

GOAL = [1.3, 0.75, 0.6]  # metres
WORKSPACE = ((1.05, 0.4, 0.38), (1.65, 1.1, 0.95))


def test_goals_are_served_in_order_with_their_seeds():
    source = GoalSource([GOAL, [1.4, 0.8, 0.5]], seeds=[7, MAX_SEED], workspace=WORKSPACE)
    first, second = source.next(), source.next()
    assert (first.index, first.seed, second.index, second.seed) == (0, 7, 1, MAX_SEED)
    assert np.array_equal(second.goal, [1.4, 0.8, 0.5]) and source.next() is None and source.remaining == 0


@pytest.mark.parametrize(
    ("goals", "seeds", "match"),
    [
        ([], None, "non-empty"),
        ([GOAL[:2], GOAL[:2]], [0], "2 goals"),
        ([[np.nan, 0.75, 0.6]], None, "NaN or inf"),
        ([[1e39, 0.75, 0.6]], None, "beyond float32's range"),  # finite in float64, inf as the policy's input
        ([GOAL], [-1], "0..18446744073709551615"),
        ([GOAL], [MAX_SEED + 1], "unsigned 64-bit"),  # the HOME frame could not carry it: raised inside the loop
    ],
)
def test_what_the_loop_could_not_serve_is_refused(goals, seeds, match):
    with pytest.raises(ValueError, match=match):
        GoalSource(goals, seeds=seeds)


def test_a_goal_outside_the_workspace_is_refused_by_index():
    with pytest.raises(ValueError, match=r"goal 1 = \[1.3, 0.2, 0.6\] m lies outside the workspace box"):
        GoalSource([GOAL, [1.3, 0.2, 0.6]], workspace=WORKSPACE)

"""The runtime's bound reckoned from true positions: it holds an arm that follows its commands, widens over a lagging
reading, and names the fault the runtime would stop an arm for that does not follow."""

from __future__ import annotations

import numpy as np

from deploy.robot_spec import load_robot_spec
from deploy.runtime.state_check import NOT_FOLLOWING
from envs.checked_bound import CheckedBound

SPEC = load_robot_spec()
GAIN = np.array(SPEC.actuator_gain)
START = np.array([1.34, 0.75, 0.53])


def inside(bounds, point, tol=1e-12) -> bool:
    low, high = (np.asarray(b) for b in bounds)
    return bool(np.all(low - tol <= point) and np.all(point <= high + tol))


def test_an_arm_that_follows_stays_inside_a_bound_that_widens_toward_where_it_came_from() -> None:
    bound = CheckedBound(SPEC, 1.0)
    bound.reset(START)
    position = START.copy()
    command = np.array([0.8, -0.4, 0.2, 0.0])
    for _ in range(10):
        previous = position.copy()
        position = position + command[:3] * SPEC.command_scale_m * GAIN  # it follows at its nominal gain
        bounds = bound.update(position, command)
        assert inside(bounds, position) and inside(bounds, previous)  # a reading one step late is still inside
        assert np.all(np.asarray(bounds[1]) - np.asarray(bounds[0]) > 0.01)  # a moving arm's bound is cm wide
    assert bound.fault == ""


def test_an_arm_pressed_against_its_reach_is_named_not_following() -> None:
    bound = CheckedBound(SPEC, 1.0)
    bound.reset(START)
    position = START.copy()
    command = np.array([0.4, 0.0, 0.0, 0.0])
    steps = 0
    while not bound.fault and steps < 20:
        position = position + np.array([0.0005, 0.0, 0.0])  # it creeps 0.5 mm a step; commanded 13 mm
        bound.update(position, command)
        steps += 1
    assert bound.fault == NOT_FOLLOWING and steps <= 5


def test_state_round_trip_replays_the_same_bounds_and_fault() -> None:
    bound = CheckedBound(SPEC, 1.0)
    bound.reset(START)
    rng = np.random.default_rng(0)
    position = START.copy()
    for _ in range(4):
        position = position + rng.normal(0, 0.005, 3)
        bound.update(position, np.append(rng.uniform(-1, 1, 3), 0.0))
    saved = bound.get_state()
    moves = [(position + rng.normal(0, 0.005, 3), np.append(rng.uniform(-1, 1, 3), 0.0)) for _ in range(6)]
    first = [(bound.update(p, c), bound.fault) for p, c in moves]
    bound.set_state(saved)
    assert [(bound.update(p, c), bound.fault) for p, c in moves] == first

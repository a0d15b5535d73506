"""One axis's reckoning (``deploy.runtime.axis_reckoning``): its interval from the commands, and when a reading
confirms the motion on that axis."""

from __future__ import annotations

import pytest

from deploy.runtime.axis_reckoning import AXIS_CONFIRM_SHARE, AXIS_COUPLING_SHARE, AxisReckoning

GAIN_MAX = 0.75
MIN_CONFIRM_M = 0.01
STEP = 0.01  # metres at command scale


def axis(index: int = 1, noise_m: float = 0.0) -> AxisReckoning:
    made = AxisReckoning(
        index, 3, GAIN_MAX, noise_m, unknown_move_m=0.05, min_confirm_m=MIN_CONFIRM_M, stiction_m=0.002
    )
    made.anchor(0.5, 0.499, 0.501)
    return made


def test_the_interval_is_the_hull_of_the_partial_sums_at_the_gain_bound_plus_coupling():
    a = axis()
    a.reckon([(1, [0.0, STEP, 0.0]), (2, [0.0, STEP, 0.0]), (3, [0.0, -3 * STEP, 0.0])])
    low, high = a.interval()
    coupling = AXIS_COUPLING_SHARE * GAIN_MAX * 2 * STEP  # the farthest partial sum is 2 cm (after two steps)
    assert high == pytest.approx(0.501 + GAIN_MAX * 2 * STEP + coupling)
    assert low == pytest.approx(0.499 - GAIN_MAX * STEP - coupling)
    a.reckon([(3, [0.0, -3 * STEP, 0.0])])  # counted once
    assert a.interval() == (low, high)
    a.reckon([(4, None)])  # a forgotten command: any move, both ways
    assert a.interval()[1] > high and a.interval()[0] < low


def test_a_commanded_axis_confirms_at_its_share_and_not_below():
    a = axis()
    a.add_certain([[0.0, 0.02, 0.0]])
    assert a.confirms(0.5 + 0.02 * AXIS_CONFIRM_SHARE + 1e-6)
    assert not a.confirms(0.5 + 0.02 * 0.6)  # a sensor that shows 60% of the motion
    assert not a.confirms(0.5 - 0.02)  # the wrong way


def test_a_quiet_axis_confirms_only_where_it_stayed_and_nothing_confirms_at_rest():
    a = axis(index=2)
    assert not a.confirms(0.5)  # no certain move at all: no evidence
    a.add_certain([[0.0, 0.03, 0.0]])  # the motion is along y; z is quiet
    tolerance = AXIS_COUPLING_SHARE * 0.03 + (1 - AXIS_CONFIRM_SHARE) * MIN_CONFIRM_M
    assert a.confirms(0.5 + 0.9 * tolerance)
    assert not a.confirms(0.5 + 0.02)  # a 2 cm offset on a quiet axis


def test_moves_under_stiction_judge_nothing():
    a = axis()
    a.add_certain([[0.0, 0.001, 0.0]] * 20)  # 2 cm in steps the arm's static friction holds
    assert not a.confirms(0.5)
    assert not a.confirms(0.52)

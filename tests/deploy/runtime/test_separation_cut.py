"""The separation barrier's geometry and cut alone: box distances, the reach, the clearance the cut evaluates, the cut
never planning inside the separation and only shrinking a command, and the cut's root finder (``cut_share``) on
straight, bent and random clearances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.runtime.position_bound import COUPLING_SHARE
from deploy.runtime.separation_cut import (
    CUT_CLEARANCE_TOL_M,
    CUT_ITERATIONS,
    CUT_SHARE_TOL,
    SEPARATION_BARRIER,
    SEPARATION_INSIDE,
    Reach,
    box_distance,
    cut_share,
    nearest,
    separation_cut,
)

MIN_SEP = 0.1
MOVE = 0.05  # metres per command unit at the gain bound


def test_box_distance_spelled_out() -> None:
    # 0.3 apart on x, 0.4 on y, overlapping on z: sqrt(0.09 + 0.16) = 0.5
    assert box_distance((0, 0, 0), (1, 1, 1), (1.3, 1.4, 0.5), (2, 2, 2)) == pytest.approx(0.5)
    assert box_distance((0, 0, 0), (1, 1, 1), (0.5, 0.5, 0.5), (2, 2, 2)) == 0.0


coordinate = st.floats(-0.5, 0.5, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    corner=st.lists(coordinate, min_size=3, max_size=3),
    size=st.lists(st.floats(0.0, 0.1), min_size=3, max_size=3),
    moves=st.lists(st.lists(st.floats(-0.06, 0.06), min_size=3, max_size=3), max_size=4),
    move=st.lists(st.floats(-0.06, 0.06), min_size=3, max_size=3),
    obstacles=st.lists(
        st.tuples(st.lists(coordinate, min_size=3, max_size=3), st.lists(st.floats(0.0, 0.3), min_size=3, max_size=3)),
        min_size=1,
        max_size=3,
    ),
)
def test_the_cuts_spare_is_the_distance_of_the_reach_box_less_what_is_required(
    corner, size, moves, move, obstacles
) -> None:
    reach = Reach(corner, [c + s for c, s in zip(corner, size, strict=True)], moves, COUPLING_SHARE)
    boxes = [(low, [v + w for v, w in zip(low, width, strict=True)]) for low, width in obstacles]
    assert reach.spare(move, boxes, [0.0] * len(boxes)) == pytest.approx(nearest(reach.box(move), boxes), abs=1e-12)
    required = [0.1 * (j + 1) for j in range(len(boxes))]
    worst = min(box_distance(*reach.box(move), *box) - need for box, need in zip(boxes, required, strict=True))
    assert reach.spare(move, boxes, required) == pytest.approx(worst, abs=1e-12)


def test_reach_is_the_hull_of_the_partial_sums_widened_by_coupling() -> None:
    # moves +0.04 then -0.1 on x: partial sums 0.04, -0.06; farthest 0.06 -> coupling 0.1 x 0.06 = 0.006 every axis
    reach = Reach((0, 0, 0), (0.01, 0, 0), [[0.04, 0, 0], [-0.1, 0, 0]], COUPLING_SHARE)
    low, high = reach.box()
    assert low == pytest.approx([-0.066, -0.006, -0.006])
    assert high == pytest.approx([0.056, 0.006, 0.006])
    low, high = reach.box([0.0, 0.0, 0.02])  # one more move: sum (-0.06, 0, 0.02)
    assert high[2] == pytest.approx(0.02 + COUPLING_SHARE * math.hypot(0.06, 0.02))


def test_a_command_toward_the_obstacle_is_cut_to_the_target() -> None:
    # the reach is a point at 0; obstacle from x = 0.3: d0 = 0.3, target 0.1 + 0.5 x 0.2 = 0.2 -> at most 0.1 m on x,
    # less the coupling of the move (0.1 x move): 1.1 x 0.05 x a <= 0.1 -> a = 1.818..., clipped by the proposal 1
    reach = Reach((0, 0, 0), (0, 0, 0), [], COUPLING_SHARE)
    obstacle = ((0.3, -1, -1), (1, 1, 1))
    cut, reason = separation_cut(reach, [1.0, 0.0, 0.0], MOVE, [obstacle], MIN_SEP, 0.5)
    assert (cut, reason) == ([1.0, 0.0, 0.0], "")
    # ten times the step: 0.5 m per unit -> 1.1 x 0.5 x a <= 0.1 -> a = 0.1818
    cut, reason = separation_cut(reach, [1.0, 0.3, 0.0], 0.5, [obstacle], MIN_SEP, 0.5)
    assert reason == SEPARATION_BARRIER
    assert cut[1] == 0.3  # the side move does not approach the obstacle: it is kept
    # never inside the target, and short of it by at most the root finder's clearance tolerance
    after = nearest(reach.box([u * 0.5 for u in cut]), [obstacle])
    assert 0.2 - 1e-12 <= after <= 0.2 + CUT_CLEARANCE_TOL_M


class Counted:
    """A spare function (metres per share) that counts its evaluations."""

    def __init__(self, fn) -> None:
        self.fn, self.calls = fn, 0

    def __call__(self, share: float) -> float:
        self.calls += 1
        return self.fn(share)


def test_the_cut_share_of_a_straight_clearance_takes_one_or_two_evaluations() -> None:
    spare = Counted(lambda s: 0.02 - 0.05 * s)  # metres: passes up to s = 0.4
    share = cut_share(spare, spare.fn(0.0), spare.fn(1.0))
    assert 0.0 <= spare.fn(share) <= CUT_CLEARANCE_TOL_M
    assert spare.calls <= 2  # bisection took CUT_ITERATIONS every time


def test_the_cut_share_where_the_clearance_bends_ends_on_the_passing_side() -> None:
    # a clearance that falls slowly, then fast past a corner (a reach box's corner rounding an obstacle's): the
    # secant keeps overshooting toward the corner; the share kept must still pass, within the tolerance
    spare = Counted(lambda s: 0.01 - 0.002 * s if s < 0.6 else 0.0088 - 0.2 * (s - 0.6))
    share = cut_share(spare, spare.fn(0.0), spare.fn(1.0))
    assert 0.0 <= spare.fn(share) <= CUT_CLEARANCE_TOL_M
    assert spare.calls <= CUT_ITERATIONS


@settings(max_examples=300, deadline=None)
@given(
    corners=st.lists(st.tuples(st.floats(0.01, 0.99), st.floats(-0.5, 0.0)), min_size=1, max_size=4),
    start=st.floats(0.0, 0.05),
    end=st.floats(-0.05, -1e-6),
)
def test_the_cut_share_always_passes_and_never_evaluates_more_than_its_budget(corners, start, end) -> None:
    # any continuous piecewise-linear spare from start >= 0 at 0 to end < 0 at 1, through random corners
    xs = [0.0, *sorted({x for x, _ in corners}), 1.0]
    ys = [start, *[dict(corners)[x] for x in xs[1:-1]], end]
    spare = Counted(lambda s: float(np.interp(s, xs, ys)))
    share = cut_share(spare, start, end)
    assert 0.0 <= share < 1.0 and spare.fn(share) >= 0.0
    assert spare.calls <= CUT_ITERATIONS
    # it stopped for a reason: near the target, a narrow bracket about a sign change, or the budget spent
    crossing = next(x for x in np.linspace(share, 1.0, 4097) if spare.fn(x) < 0)
    assert spare.fn(share) <= CUT_CLEARANCE_TOL_M or crossing - share <= CUT_SHARE_TOL or spare.calls == CUT_ITERATIONS


def test_inside_the_separation_only_moves_away_pass() -> None:
    reach = Reach((0, 0, 0), (0, 0, 0), [], COUPLING_SHARE)
    obstacle = ((0.05, -1, -1), (1, 1, 1))  # centre at x 0.525, y 0, z 0
    cut, reason = separation_cut(reach, [0.5, 0.2, -0.3], MOVE, [obstacle], MIN_SEP, 0.5)
    assert reason == SEPARATION_INSIDE
    assert cut == [0.0, 0.2, -0.3]  # x toward it is dropped; y, z (the obstacle's centre is at 0) are away or level
    cut, reason = separation_cut(reach, [-0.5, 0.0, 0.0], MOVE, [obstacle], MIN_SEP, 0.5)
    assert (cut, reason) == ([-0.5, 0.0, 0.0], "")


boxes = st.tuples(
    st.lists(st.floats(-0.5, 0.5), min_size=3, max_size=3), st.lists(st.floats(0.0, 0.1), min_size=3, max_size=3)
)
commands = st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3)


def approaches(command: list[float], low: list[float], high: list[float], o_low, o_high) -> bool:
    """Whether ``command`` moves the box (low, high) toward the obstacle on an axis on which the two are apart."""
    return any(
        (u > 0 and h < ol) or (u < 0 and lo > oh)
        for u, lo, h, ol, oh in zip(command, low, high, o_low, o_high, strict=True)
    )


@settings(max_examples=400, deadline=None)
@given(
    own=boxes,
    others=st.lists(boxes, min_size=1, max_size=2),
    in_flight=st.lists(commands, max_size=3),
    proposed=commands,
    fraction=st.floats(0.1, 1.0),
    reserve=st.floats(0.0, 0.02),
)
def test_never_plans_inside_the_separation(own, others, in_flight, proposed, fraction, reserve) -> None:
    low = own[0]
    high = [lo + w for lo, w in zip(*own, strict=True)]
    obstacles = [(o[0], [lo + w for lo, w in zip(*o, strict=True)]) for o in others]
    reach = Reach(low, high, [[u * MOVE for u in c] for c in in_flight], COUPLING_SHARE)
    box0 = reach.box()
    cut, _ = separation_cut(reach, proposed, MOVE, obstacles, MIN_SEP, fraction, reserve)
    for c, p in zip(cut, proposed, strict=True):  # a cut only shrinks a component toward 0, never flips it
        assert abs(c) <= abs(p) + 1e-12 and c * p >= 0
    after = reach.box([u * MOVE for u in cut])
    d0 = nearest(box0, obstacles)
    if (
        d0 < MIN_SEP
    ):  # inside: only moves away from the obstacle's centre pass (their coupling aside, they open the gap)
        centre = [(a + b) / 2 for a, b in zip(*box0, strict=True)]
        for o_low, o_high in obstacles:
            if box_distance(*box0, o_low, o_high) < MIN_SEP:
                for c, mine, lo, hi in zip(cut, centre, o_low, o_high, strict=True):
                    assert c * (mine - (lo + hi) / 2) >= 0
        return
    floor = MIN_SEP + reserve
    for o_low, o_high in obstacles:
        d = box_distance(*box0, o_low, o_high)
        clear = box_distance(*after, o_low, o_high)
        assert clear >= MIN_SEP - 1e-9  # never inside the separation, whatever the command
        if approaches(cut, *box0, o_low, o_high):  # an approach only from outside the reserve, and only so far
            assert d >= floor
            assert clear >= floor + (1 - fraction) * (d - floor) - 1e-9


def test_arms_parked_in_the_reserve_can_still_part() -> None:
    # the reach is a point at 0; the obstacle 0.107 m away on x, overlapping on y and z: inside the 1 cm reserve.
    # Toward it (+x) nothing passes; sideways (y) and away (-x) pass, their coupling (5 mm) spending the reserve
    reach = Reach((0, 0, 0), (0, 0, 0), [], COUPLING_SHARE)
    obstacle = ((0.107, -1, -1), (1, 1, 1))
    cut, reason = separation_cut(reach, [1.0, 0.5, 0.0], MOVE, [obstacle], MIN_SEP, 0.5, reserve_m=0.01)
    assert reason == SEPARATION_BARRIER and cut == [0.0, 0.5, 0.0]
    cut, reason = separation_cut(reach, [-1.0, 0.0, 0.0], MOVE, [obstacle], MIN_SEP, 0.5, reserve_m=0.01)
    assert (cut, reason) == ([-1.0, 0.0, 0.0], "")
    # without a reserve the same pair could not part: the approach took the reach to the separation itself, and
    # every move's coupling (0.1 x its length on each axis) would cross it
    at_separation = ((0.1001, -1, -1), (1, 1, 1))
    cut, _ = separation_cut(reach, [0.0, 1.0, 0.0], MOVE, [at_separation], MIN_SEP, 0.5, reserve_m=0.0)
    assert abs(cut[1]) < 0.05


def test_an_approach_stops_at_the_reserve() -> None:
    # obstacle 0.3 m away on x: with a 2 cm reserve the approach aims at 0.12 + 0.5 x (0.3 - 0.12) = 0.21 m
    reach = Reach((0, 0, 0), (0, 0, 0), [], COUPLING_SHARE)
    obstacle = ((0.3, -1, -1), (1, 1, 1))
    cut, reason = separation_cut(reach, [1.0, 0.0, 0.0], 0.5, [obstacle], MIN_SEP, 0.5, reserve_m=0.02)
    assert reason == SEPARATION_BARRIER
    after = nearest(reach.box([u * 0.5 for u in cut]), [obstacle])
    assert 0.21 - 1e-12 <= after <= 0.21 + CUT_CLEARANCE_TOL_M


def test_a_near_obstacle_does_not_block_a_move_it_is_not_in_the_way_of() -> None:
    # the partner's reach 0.105 m away on +x (in the reserve), the partner's home box 0.3 m below: moving down
    # approaches only the home box, far away, and passes; a single nearest distance once froze such an arm
    reach = Reach((0, 0, 0), (0, 0, 0), [], COUPLING_SHARE)
    partner = ((0.105, -1, -1), (1, 1, 1))
    home = ((-1, -1, -1), (-0.5, 1, -0.3))
    cut, reason = separation_cut(reach, [0.0, 0.0, -0.6], MOVE, [partner, home], MIN_SEP, 0.5, reserve_m=0.01)
    assert (cut, reason) == ([0.0, 0.0, -0.6], "")

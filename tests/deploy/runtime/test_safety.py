"""The safety filter's arithmetic, spelled out with the numbers, and property tests of the workspace box (any
actuator gain up to the bound, any true position inside the given bounds)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.contract import fetch_reach_contract
from deploy.robot_spec import load_robot_spec
from deploy.runtime.safety import (
    CLIP,
    NAN_ACTION,
    NAN_PREVIOUS,
    NAN_STATE,
    OUTSIDE_WORKSPACE,
    RATE_LIMIT,
    STALE_HOLD,
    STALE_STOP,
    WORKSPACE_BARRIER,
    InterventionCounter,
    SafetyLimits,
    filter_action,
)

# Box 0..1 m on every axis, 0.1 m per command unit, half the gap per step, generous rate limit.
LIMITS = SafetyLimits(
    workspace_low=(0.0, 0.0, 0.0),
    workspace_high=(1.0, 1.0, 1.0),
    max_action=1.0,
    max_action_rate=2.0,
    barrier_fraction=0.5,
    action_scale_m=0.1,
    watchdog_hold_s=0.1,
    watchdog_stop_s=0.5,
)
CENTRE = np.array([0.5, 0.5, 0.5])
NO_PENDING = np.zeros(3)
ZERO4 = np.zeros(4)
FRESH_S = 0.01
ROUNDING_M = 1e-12  # float rounding allowance on positions (metres)


def run(proposed, position=CENTRE, pending=NO_PENDING, previous=ZERO4, age=FRESH_S, limits=LIMITS, bounds=None):
    return filter_action(
        np.asarray(position, float),
        np.asarray(pending, float),
        np.asarray(proposed, float),
        previous,
        age,
        limits,
        bounds,
    )


def test_inside_and_slow_passes_unchanged():
    # centre 0.5 m, action 0.3 -> 0.03 m; the barrier allows 0.5 * 0.5 m / 0.1 = 2.5 units: untouched
    result = run([0.3, -0.2, 0.1, 0.7])
    np.testing.assert_array_equal(result.action, [0.3, -0.2, 0.1, 0.7])
    assert result.reasons == ()
    assert result.stop is False


def test_clip_to_max_action():
    # [3, -7, 0, 1.5] clipped to +-1 -> [1, -1, 0, 1]; the barrier (+-2.5 units at the centre) does not bind
    result = run([3.0, -7.0, 0.0, 1.5])
    np.testing.assert_array_equal(result.action, [1.0, -1.0, 0.0, 1.0])
    assert result.reasons == (CLIP,)


def test_rate_limit_between_ticks():
    limits = SafetyLimits((0, 0, 0), (1, 1, 1), max_action_rate=0.25, action_scale_m=0.1)
    # previous [0.5, 0, -0.5, 0]; proposal [1, 0.1, 0.5, -1]; each moves at most 0.25:
    # 1 -> 0.75 (0.5 + 0.25), 0.1 stays, 0.5 -> -0.25 (-0.5 + 0.25), -1 -> -0.25 (0 - 0.25)
    result = run([1.0, 0.1, 0.5, -1.0], previous=np.array([0.5, 0.0, -0.5, 0.0]), limits=limits)
    np.testing.assert_allclose(result.action, [0.75, 0.1, -0.25, -0.25])
    assert result.reasons == (RATE_LIMIT,)


def test_barrier_upper_face_takes_a_fraction_of_the_gap():
    # x = 0.9 m, gap to the high face 0.1 m; fraction 0.5 -> at most 0.05 m -> 0.05 / 0.1 = 0.5 units
    result = run([1.0, 0.0, 0.0, 0.0], position=[0.9, 0.5, 0.5])
    assert result.action[0] == pytest.approx(0.5)
    assert result.reasons == (WORKSPACE_BARRIER,)
    # the next position 0.95 m keeps h = 0.05 >= (1 - 0.5) * 0.1
    assert 0.9 + 0.1 * result.action[0] == pytest.approx(0.95)


def test_barrier_lower_face_counts_the_commands_in_flight():
    # y measured 0.2 m, but -0.12 m still in flight -> it ends at 0.08 m; gap to low 0.08 m;
    # fraction 0.5 -> at most 0.04 m further down -> -0.4 units (the proposal -1 is cut)
    result = run([0.0, -1.0, 0.0, 0.0], position=[0.5, 0.2, 0.5], pending=[0.0, -0.12, 0.0])
    assert result.action[1] == pytest.approx(-0.4)
    assert result.reasons == (WORKSPACE_BARRIER,)
    # moving away from the face is not limited by it: +1 unit passes
    result = run([0.0, 1.0, 0.0, 0.0], position=[0.5, 0.2, 0.5], pending=[0.0, -0.12, 0.0])
    assert result.action[1] == 1.0
    assert result.reasons == ()


def test_barrier_plans_with_the_gain_bound():
    # gain bound 1.5: one unit moves up to 0.15 m. x = 0.9 m: at most 0.5 * 0.1 m -> 0.05 / 0.15 = 1/3 unit
    limits = replace(LIMITS, actuator_gain_max=1.5)
    result = run([1.0, 0.0, 0.0, 0.0], position=[0.9, 0.5, 0.5], limits=limits)
    assert result.action[0] == pytest.approx(1 / 3)
    # +0.04 m in flight (nominal) moves up to 0.06 m: the arm may end at 0.96 m, gap 0.04 -> 0.02 / 0.15 units
    result = run([1.0, 0.0, 0.0, 0.0], position=[0.9, 0.5, 0.5], pending=[0.04, 0.0, 0.0], limits=limits)
    assert result.action[0] == pytest.approx(0.02 / 0.15)


def test_motion_in_flight_away_from_a_face_is_not_counted_on():
    # x = 0.95 m with -0.1 m in flight: with a small gain the arm may not move away, so the gap stays 0.05 m
    # -> 0.5 * 0.05 / 0.1 = 0.25 units (a filter that counted on the retreat would allow 0.75)
    result = run([1.0, 0.0, 0.0, 0.0], position=[0.95, 0.5, 0.5], pending=[-0.1, 0.0, 0.0])
    assert result.action[0] == pytest.approx(0.25)


def test_position_bounds_plan_from_the_bound_nearest_each_face():
    # measured x = 0.9 m, but the gripper may be anywhere in [0.85, 0.92]: the high face plans from 0.92
    # (gap 0.08 -> 0.4 units), the low face from 0.85 (gap 0.85 -> -4.25 units: the clip binds first)
    bounds = (np.array([0.85, 0.5, 0.5]), np.array([0.92, 0.5, 0.5]))
    assert run([1.0, 0, 0, 0], position=[0.9, 0.5, 0.5], bounds=bounds).action[0] == pytest.approx(0.4)
    assert run([-1.0, 0, 0, 0], position=[0.9, 0.5, 0.5], bounds=bounds).action[0] == pytest.approx(-1.0)
    nan_bounds = (np.array([np.nan, 0.5, 0.5]), np.array([0.92, 0.5, 0.5]))
    assert run([1.0, 0, 0, 0], position=[0.9, 0.5, 0.5], bounds=nan_bounds).reasons == (NAN_STATE,)


def test_barrier_on_two_faces_and_after_the_clip():
    # x = 0.98 (gap 0.02 -> 0.01 m -> 0.1 unit), z = 0.04 (gap 0.04 -> 0.02 m -> -0.2 unit), y free
    # proposal [5, 0.3, -5, 9]: clip -> [1, 0.3, -1, 1], barrier -> [0.1, 0.3, -0.2, 1]
    result = run([5.0, 0.3, -5.0, 9.0], position=[0.98, 0.5, 0.04])
    np.testing.assert_allclose(result.action, [0.1, 0.3, -0.2, 1.0])
    assert result.reasons == (CLIP, WORKSPACE_BARRIER)


def test_barrier_wins_over_the_rate_limit():
    # previous x command 1.0 toward a face 0.01 m away: the barrier allows 0.5 * 0.01 / 0.1 = 0.05 units
    # although the rate limit (0.25) would only let the command drop to 0.75
    limits = SafetyLimits((0, 0, 0), (1, 1, 1), max_action_rate=0.25, action_scale_m=0.1)
    result = run([1.0, 0, 0, 0], position=[0.99, 0.5, 0.5], previous=np.array([1.0, 0, 0, 0]), limits=limits)
    assert result.action[0] == pytest.approx(0.05)
    assert result.reasons == (WORKSPACE_BARRIER,)


def test_outside_the_box_forbids_motion_further_out_but_does_not_push_back():
    # x = 1.02 m is 0.02 m above the high face: outward (+) is cut to 0, inward allowed up to
    # 0.5 * (1.02 - 0) / 0.1 = 5.1 units, so the proposal -0.3 passes
    result = run([0.4, 0.0, 0.0, 0.0], position=[1.02, 0.5, 0.5])
    assert result.action[0] == 0.0
    assert result.reasons == (WORKSPACE_BARRIER, OUTSIDE_WORKSPACE)
    result = run([-0.3, 0.0, 0.0, 0.0], position=[1.02, 0.5, 0.5])
    assert result.action[0] == pytest.approx(-0.3)
    assert result.reasons == (OUTSIDE_WORKSPACE,)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_action_holds(bad):
    result = run([0.1, bad, 0.0, 0.0])
    np.testing.assert_array_equal(result.action, ZERO4)
    assert result.reasons == (NAN_ACTION,)
    assert result.stop is False


@pytest.mark.parametrize("where", ["position", "pending"])
def test_non_finite_state_holds(where):
    bad = np.array([0.5, math.nan, 0.5])
    result = run([0.1, 0.1, 0.0, 0.0], **{where: bad})
    np.testing.assert_array_equal(result.action, ZERO4)
    assert result.reasons == (NAN_STATE,)


def test_non_finite_previous_action_is_replaced_by_hold():
    limits = SafetyLimits((0, 0, 0), (1, 1, 1), max_action_rate=0.25, action_scale_m=0.1)
    # previous taken as zeros -> the rate limit allows +-0.25: 0.6 -> 0.25
    result = run([0.6, 0, 0, 0], previous=np.array([math.nan, 0, 0, 0]), limits=limits)
    assert result.action[0] == pytest.approx(0.25)
    assert result.reasons == (NAN_PREVIOUS, RATE_LIMIT)


@pytest.mark.parametrize(
    ("age", "reason", "stop"),
    [(0.1, None, False), (0.1001, STALE_HOLD, False), (0.5, STALE_HOLD, False), (0.5001, STALE_STOP, True)],
)
def test_watchdog_hold_then_stop(age, reason, stop):
    # hold beyond 0.1 s, stop beyond 0.5 s (the limits are inclusive)
    result = run([0.2, 0.0, 0.0, 0.0], age=age)
    assert result.stop is stop
    if reason is None:
        assert result.reasons == ()
    else:
        np.testing.assert_array_equal(result.action, ZERO4)
        assert result.reasons == (reason,)


def test_nan_state_age_is_a_stop():
    result = run([0.2, 0.0, 0.0, 0.0], age=math.nan)
    assert result.stop is True
    assert result.reasons == (STALE_STOP,)


def test_wrong_shapes_raise_with_a_message():
    with pytest.raises(ValueError, match="position_m must have 3 values"):
        run([0.0] * 4, position=[0.5, 0.5])
    with pytest.raises(ValueError, match="first 3 must be the Cartesian displacement"):
        run([0.0, 0.0])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"workspace_low": (0, 0, 1), "workspace_high": (1, 1, 1)},
        {"barrier_fraction": 0.0},
        {"barrier_fraction": 1.5},
        {"max_action": -1.0},
        {"watchdog_hold_s": 1.0, "watchdog_stop_s": 0.5},
        {"action_scale_m": math.nan},
    ],
)
def test_invalid_limits_are_refused(kwargs):
    args = {"workspace_low": (0, 0, 0), "workspace_high": (1, 1, 1)} | kwargs
    with pytest.raises(ValueError):
        SafetyLimits(**args)


def test_from_spec_uses_the_specs_box_gain_and_watchdog():
    spec = load_robot_spec()  # calibration/sim_fetch.yaml
    limits = SafetyLimits.from_spec(spec, fetch_reach_contract(2))
    assert limits.workspace_low == spec.workspace_low
    assert limits.workspace_high == spec.workspace_high
    assert limits.barrier_fraction == spec.barrier_fraction
    assert limits.action_scale_m == spec.command_scale_m == 0.05
    assert limits.actuator_gain_max == spec.actuator_gain_max
    assert limits.watchdog_stop_s == spec.watchdog_stop_s
    overridden = SafetyLimits.from_spec(spec, fetch_reach_contract(2), watchdog_hold_s=0.2, watchdog_stop_s=1.0)
    assert (overridden.watchdog_hold_s, overridden.watchdog_stop_s) == (0.2, 1.0)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("control_period_s", 0.004, "runs at 0.04 s per control step, the policy at 0.004 s.*recalibrate"),
        ("action_scale_m", 0.1, "moves 0.05 m per command unit, the policy commands 0.1 m per unit"),
    ],
)
def test_from_spec_refuses_another_period_or_command_scale(field, value, match):
    contract = replace(fetch_reach_contract(2), **{field: value})
    with pytest.raises(ValueError, match=match):
        SafetyLimits.from_spec(load_robot_spec(), contract)


def test_intervention_counter_counts_by_reason():
    counter = InterventionCounter()
    counter.update(run([3.0, 0, 0, 0]))  # clip
    counter.update(run([math.nan, 0, 0, 0]))  # nan_action
    counter.update(run([0.1, 0, 0, 0]))  # nothing
    counter.update(run([5.0, 0, 0, 0], position=[0.99, 0.5, 0.5]))  # clip + barrier
    assert counter.as_dict() == {CLIP: 2, NAN_ACTION: 1, WORKSPACE_BARRIER: 1, "ticks": 4}
    assert counter.total == 4


# Property: any true position in the bounds, in-flight commands that keep the arm inside for any gain up to the
# bound, any proposal, any true gain up to the bound -> the arm stays inside and approaches each face by at most
# the fraction of its gap. ---------------------------------------------------------------------------------------
coordinate = st.floats(0.0, 1.0, allow_nan=False)
share = st.floats(0.0, 1.0, allow_nan=False)
wild = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e300, 1e300),
    st.floats(-2.0, 2.0),
    st.sampled_from([0.0, 1.0, -1.0, 5e-324, 1e308]),
)
limits_strategy = st.builds(
    lambda frac, scale, rate, gain: SafetyLimits(
        (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 1.0, rate, frac, scale, actuator_gain_max=gain
    ),
    st.floats(1e-3, 1.0),
    st.floats(1e-3, 1.0),
    st.floats(1e-3, 2.0),
    st.floats(0.1, 3.0),
)


@settings(max_examples=400, deadline=None)
@given(
    low=st.tuples(coordinate, coordinate, coordinate),
    high=st.tuples(coordinate, coordinate, coordinate),
    where=st.tuples(share, share, share),
    target=st.tuples(coordinate, coordinate, coordinate),
    proposed=st.lists(wild, min_size=4, max_size=4),
    previous=st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4),
    gain_share=share,
    limits=limits_strategy,
)
def test_the_arm_never_leaves_the_box(low, high, where, target, proposed, previous, gain_share, limits):
    low, high = np.minimum(low, high), np.maximum(low, high)
    true = low + np.array(where) * (high - low)  # the gripper is somewhere in the bounds
    measured = low + 0.5 * (high - low)
    gain_max = limits.actuator_gain_max
    # in flight (nominal metres): from the true position, the arm ends at ``target`` at the full gain bound
    pending = (np.array(target) - true) / gain_max
    result = filter_action(measured, pending, np.array(proposed), np.array(previous), FRESH_S, limits, (low, high))
    assert np.all(np.isfinite(result.action))
    assert np.all(np.abs(result.action) <= limits.max_action)
    keep = 1.0 - limits.barrier_fraction
    for gain in (gain_max, gain_share * gain_max):
        start = true + gain * pending
        end = start + gain * limits.action_scale_m * result.action[:3]
        assert np.all(end >= -ROUNDING_M) and np.all(end <= 1.0 + ROUNDING_M)
        # discrete-time barrier, worst case over where the gripper may be: h(next) >= (1 - fraction) h(now)
        worst_high = np.maximum(high + gain_max * np.maximum(pending, 0.0), start)
        worst_low = np.minimum(low + gain_max * np.minimum(pending, 0.0), start)
        assert np.all(1.0 - end >= keep * (1.0 - worst_high) - ROUNDING_M)
        assert np.all(end >= keep * worst_low - ROUNDING_M)

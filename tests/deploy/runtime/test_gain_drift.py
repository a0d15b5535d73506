"""The barrier plans with the spec's gain bound: a robot whose actuators drift anywhere up to the bound never leaves
the box, and neither does the demo's drifted robot (delay 6, gain x1.5) once it is recalibrated.

Lock-step simulated robot over a pty, a policy pushing full speed toward the y-low and z-high faces. The truth is
the robot's physics trace (``SimRobot.trace``), not what it reports.
"""

from __future__ import annotations

import numpy as np
import pytest
from loop_fixtures import FAST_PERIOD_S, Push, robot_spec, run_loop, seeded_goals

from calibration.probe import ProbeConfig, calibrate
from deploy.runtime.loop import LoopConfig
from deploy.runtime.state_machine import LoopState
from deploy.wire import Link
from envs.sim_robot import SimRobot

OUTSIDE_TOL_M = 1e-3
TOWARD_FACES = (0.0, -1.0, 1.0, 0.0)  # y-low (0.40 m) and z-high (0.95 m) at full speed
EPISODES, STEPS = 3, 40
SPEC = robot_spec(hold_s=0.05, stop_s=0.2)
DEMO_DRIFT = {"delay": 6, "action_gain": 1.5}
CALIBRATION_BOX = ((1.05, 0.40, 0.40), (1.65, 1.10, 0.95))


def largest_gain_within_the_bound(spec) -> float:
    """The largest simulated actuator gain whose every axis stays within the spec's bound (the sim's gain at 1.0 is
    the spec's measured per-axis gain)."""
    return spec.actuator_gain_max / max(SPEC.actuator_gain)


def worst_outside_m(robot: SimRobot, spec) -> float:
    trace = np.array(robot.trace)
    low, high = np.array(spec.workspace_low), np.array(spec.workspace_high)
    return float(np.max(np.maximum(low - trace, trace - high)))


def push(robot: SimRobot, spec):
    config = LoopConfig(period_s=FAST_PERIOD_S, max_episode_steps=STEPS, max_ticks=600)
    return run_loop(Push(TOWARD_FACES), seeded_goals(list(range(EPISODES))), config, spec, robot)


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0], ids=["gain_1.0", "halfway", "at_the_bound"])
def test_gain_drift_up_to_the_calibrated_bound_stays_inside(share: float):
    top = largest_gain_within_the_bound(SPEC)
    assert top > 1.05, "the shipped spec's bound should leave room for some drift"
    action_gain = 1.0 + share * (top - 1.0)
    robot = SimRobot(mode="lockstep", delay=2, action_gain=action_gain, seed=3)
    run = push(robot, SPEC)
    assert worst_outside_m(robot, SPEC) <= OUTSIDE_TOL_M
    assert "workspace_barrier" in run.report.interventions
    assert len(run.report.episodes) == EPISODES
    assert not any(t.target is LoopState.SAFE_STOP for t in run.report.transitions)  # an in-spec robot is believed


def recalibrated(delay: int, action_gain: float):
    robot = SimRobot(mode="lockstep", delay=delay, action_gain=action_gain, seed=5).start()
    try:
        with Link(robot.port_name) as link:
            config = ProbeConfig(CALIBRATION_BOX[0], CALIBRATION_BOX[1], robot_id="drifted", repeats=3)
            spec, _ = calibrate(link, config)
    finally:
        robot.stop()
    return spec


def test_the_demo_drift_recalibrated_stays_inside():
    measured = recalibrated(**DEMO_DRIFT)
    assert measured.delay_steps == DEMO_DRIFT["delay"]
    assert measured.actuator_gain_max > 1.4 * SPEC.actuator_gain_max  # the gain moved: the bound follows it
    spec = robot_spec(
        hold_s=0.05,
        stop_s=0.2,
        delay_steps=measured.delay_steps,
        delay_ms=measured.delay_ms,
        delay_range=measured.delay_range,
        actuator_gain=measured.actuator_gain,
        actuator_gain_spread=measured.actuator_gain_spread,
        actuator_gain_max=measured.actuator_gain_max,
        plausible_speed_m_s=measured.plausible_speed_m_s,
    )
    robot = SimRobot(mode="lockstep", seed=3, **DEMO_DRIFT)
    run = push(robot, spec)
    assert worst_outside_m(robot, spec) <= OUTSIDE_TOL_M
    assert len(run.report.episodes) == EPISODES


def test_a_robot_faster_than_its_spec_is_caught_not_believed():
    """The demo's drift on a runtime that still has the old spec: the arm moves further than the spec allows; the
    checker flags the motion, the loop holds and stops rather than planning with the wrong gain."""
    robot = SimRobot(mode="lockstep", seed=3, **DEMO_DRIFT)
    run = push(robot, SPEC)
    flagged = run.report.counts.get("implausible_unexplained_motion", 0)
    assert flagged >= 1
    assert any(t.target is LoopState.SAFE_STOP for t in run.report.transitions)
    print(
        f"old spec on the drifted robot: worst {1e3 * worst_outside_m(robot, SPEC):.1f} mm outside, {flagged} flagged"
    )

"""Calibration measures the actuator gain through the link; the barrier's bound covers the gains it was measured at.

The truth is measured in pure simulation, not through the link: per axis, the displacement one command of 0.3 units
causes once the arm has settled, minus the sag of an arm that held still over the same steps, over the commanded
0.3 x 0.05 m. (FetchReach's mocap arm moves about 0.66 of the commanded displacement per unit at action_gain 1.)
"""

from __future__ import annotations

import numpy as np
import pytest

from calibration.probe import ProbeConfig, calibrate
from deploy.robot_spec import load_robot_spec

sim_robot = pytest.importorskip("envs.sim_robot")
from envs.delayed_fetch_reach import DelayedFetchReachEnv  # noqa: E402

PULSE_UNITS = 0.3
SETTLE_STEPS = 12
GAIN_TOLERANCE = 0.05  # relative
FULL_BOX = ((1.05, 0.40, 0.40), (1.65, 1.10, 0.95))


def true_gain(action_gain: float) -> np.ndarray:
    """Per axis: metres moved per metre commanded, from a pulse against a held-still twin (pure simulation)."""
    env = DelayedFetchReachEnv(delay=0, action_gain=action_gain)
    scale = env.contract.action_scale_m
    gains = np.empty(3)
    try:
        for axis in range(3):
            finals = []
            for pulse in (0.0, PULSE_UNITS):
                obs, _ = env.reset(seed=0)
                for step in range(SETTLE_STEPS):
                    command = np.zeros(4)
                    if step == 0:
                        command[axis] = pulse
                    obs, *_ = env.step(command)
                finals.append(obs["observation"][axis])
            gains[axis] = (finals[1] - finals[0]) / (PULSE_UNITS * scale)
    finally:
        env.close()
    return gains


def calibrated(action_gain: float, delay: int, repeats: int = 3):
    robot = sim_robot.SimRobot(mode="lockstep", delay=delay, action_gain=action_gain, seed=delay)
    robot.start()
    try:
        from deploy.wire import Link

        with Link(robot.port_name) as link:
            config = ProbeConfig(FULL_BOX[0], FULL_BOX[1], robot_id="gain_test", repeats=repeats, seed=delay)
            spec, report = calibrate(link, config)
    finally:
        robot.stop()
    return spec, report


def test_the_truth_is_linear_in_the_simulated_gain():
    # sanity of the reference itself: 1.5 x the actuator gain moves 1.5 x as far (within rounding of the physics)
    np.testing.assert_allclose(true_gain(1.5), 1.5 * true_gain(1.0), rtol=0.01)


def _check(action_gain: float, delay: int) -> None:
    spec, report = calibrated(action_gain, delay)
    truth = true_gain(action_gain)
    assert spec.delay_steps == delay
    np.testing.assert_allclose(spec.actuator_gain, truth, rtol=GAIN_TOLERANCE)
    assert spec.actuator_gain_max >= max(spec.actuator_gain)
    assert spec.actuator_gain_max >= max(truth)  # the barrier's bound covers the real arm
    assert spec.plausible_speed_m_s >= spec.max_step_m / spec.control_period_s
    assert len(report.gains_per_axis) == 3


@pytest.mark.parametrize(("action_gain", "delay"), [(1.0, 2), (1.5, 0)])
def test_calibration_recovers_the_gain(action_gain: float, delay: int):
    _check(action_gain, delay)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0, 1, 2, 3])
@pytest.mark.parametrize("action_gain", [0.8, 1.0, 1.5])
def test_calibration_recovers_the_gain_at_every_gain_and_delay(action_gain: float, delay: int):
    _check(action_gain, delay)


def test_the_shipped_sim_spec_is_what_calibration_measures():
    spec = load_robot_spec()
    np.testing.assert_allclose(spec.actuator_gain, true_gain(1.0), rtol=GAIN_TOLERANCE)
    assert spec.actuator_gain_max >= max(true_gain(1.0))

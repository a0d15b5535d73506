"""A failing policy leads to a safe stop within ``policy_fault_stop_s``; the e-stop repeats until the robot
acknowledges it; a HOME is not resent before the measured round trip could have answered it.

Lock-step simulated robot over a pty; the loop period is 10 ms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from loop_fixtures import DELAY, DelayAwareP, robot_spec, run_loop, seeded_goals

from deploy.runtime.loop import LoopConfig
from deploy.runtime.state_machine import LoopState
from envs.sim_robot import SimRobot

PERIOD_S = 0.01
FAULT_STOP_S = 0.05
LOST_ESTOPS = 3


class FailsFrom:
    """The P policy until its ``n``-th call, then NaN (or an exception, or a wrong size) for good."""

    def __init__(self, n: int, how: str) -> None:
        self.n, self.how, self.calls = n, how, 0
        self.inner = DelayAwareP()

    def __call__(self, obs):
        self.calls += 1
        if self.calls < self.n:
            return self.inner(obs)
        if self.how == "nan":
            return np.full((1, 4), np.nan, dtype=np.float32)
        if self.how == "raise":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return np.zeros((1, 3), dtype=np.float32)


@pytest.mark.parametrize("how", ["nan", "raise", "wrong_size"])
def test_a_failing_policy_is_stopped_within_the_configured_time(how: str):
    robot = SimRobot(mode="lockstep", delay=DELAY, control_period_s=PERIOD_S)
    robot.faults.drop_estops = LOST_ESTOPS  # the first e-stops are lost: the loop must repeat it
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=30, max_ticks=150, policy_fault_stop_s=FAULT_STOP_S)
    run = run_loop(FailsFrom(6, how), seeded_goals([0, 1]), config, robot_spec(), robot=robot)
    faults = [r for r in run.records if "policy_fault" in r.reasons]
    assert faults and all(np.all(r.sent == 0.0) for r in faults if not r.stop)  # every failed tick held the arm
    stop = next(t for t in run.report.transitions if t.target is LoopState.SAFE_STOP)
    assert "the policy failed" in stop.reason
    # held from the first failure, stopped once it had failed for FAULT_STOP_S (5 periods), plus one for rounding
    assert stop.tick - faults[0].tick <= math.ceil(FAULT_STOP_S / PERIOD_S) + 1
    # the e-stop went out again every period until the robot got one and said so (ESTOP_ACTIVE)
    assert run.report.counts["estop_repeats"] >= LOST_ESTOPS
    assert robot.faults.drop_estops == 0 and robot.counts["estops"] >= 1
    assert len(run.report.episodes) == 2  # after the stop the loop recovered and served the next goal


def test_the_shutdown_stop_repeats_until_acknowledged():
    robot = SimRobot(mode="lockstep", delay=DELAY, control_period_s=PERIOD_S)
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=5, max_ticks=60)

    def lose_the_next_estops(controller, record):
        if controller.sm.state is LoopState.RUN:
            robot.faults.drop_estops = LOST_ESTOPS

    run = run_loop(DelayAwareP(), seeded_goals([0]), config, robot_spec(), robot=robot, on_tick=lose_the_next_estops)
    assert robot.estop_active  # the stop in finally reached the robot although the first ones were lost
    assert robot.faults.drop_estops == 0
    assert run.report.counts.get("stop_not_acknowledged", 0) == 0


def test_a_home_is_not_resent_before_the_round_trip_could_answer_it():
    """Replies take 6 periods (60 ms); the configured retry (3 ticks = 30 ms) would send every HOME twice. The loop
    waits for twice the measured round trip instead."""
    robot = SimRobot(mode="lockstep", delay=DELAY, control_period_s=PERIOD_S)
    robot.faults.reply_delay_periods = 6
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=5, home_retry_ticks=3, hold_ticks=5, max_ticks=300)
    spec = robot_spec(hold_s=0.2, stop_s=0.5)
    run = run_loop(DelayAwareP(), seeded_goals([0, 1, 2]), config, spec, robot=robot)
    assert len(run.report.episodes) == 3
    assert run.report.counts.get("home_retries", 0) == 0
    assert robot.counts["homes"] == 3

"""StateRateCheck: the robot's step (its clock between consecutive states) against the loop's period; and the
control loop ending a run on a real-time robot that steps at another rate than the loop."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
from loop_fixtures import DelayAwareP, robot_spec, run_loop, seeded_goals

from deploy.runtime.loop import LoopConfig
from deploy.runtime.loop_modes import STATE_RATE_MISMATCH
from deploy.runtime.state_machine import LoopState
from deploy.runtime.state_rate import DEFAULT_RATE_TOLERANCE, StateRateCheck
from deploy.wire import StateFlags, StateMsg
from deploy.wire.messages import SEQ_MAX
from envs.sim_robot import SimRobot

PERIOD_S = 0.04
WINDOW = 9


def feed(check: StateRateCheck, robot_period_s: float, n: int, first_seq: int = 1, states_per_tick: float = 0.0):
    """``n`` states of a robot stepping every ``robot_period_s``, read by a loop ticking every PERIOD_S."""
    for i in range(n):
        t = i * robot_period_s
        check.add((first_seq - 1 + i) % SEQ_MAX + 1, t, tick=int(t / PERIOD_S + 1e-9))


@pytest.mark.parametrize("robot_period_s", [PERIOD_S, PERIOD_S * (1 + DEFAULT_RATE_TOLERANCE / 2)])
def test_a_robot_at_the_loops_period_passes(robot_period_s):
    check = StateRateCheck(PERIOD_S, window=WINDOW)
    feed(check, robot_period_s, 40)
    assert check.mismatch() == "" and math.isclose(check.median_interval_s, robot_period_s)


@pytest.mark.parametrize(("robot_period_s", "hz"), [(0.08, "12.5 Hz"), (0.02, "50.0 Hz"), (0.03, "33.3 Hz")])
def test_a_robot_at_another_rate_is_named_with_both_rates_and_the_fix(robot_period_s, hz):
    check = StateRateCheck(PERIOD_S, window=WINDOW)
    feed(check, robot_period_s, 3 * WINDOW)
    problem = check.mismatch()
    assert hz in problem and "25.0 Hz" in problem and "control_period_s" in problem and "re-calibrate" in problem


def test_nothing_is_judged_before_the_window_is_full():
    check = StateRateCheck(PERIOD_S, window=WINDOW)
    feed(check, 0.08, WINDOW)  # WINDOW states: WINDOW - 1 intervals
    assert check.mismatch() == "" and math.isclose(check.median_interval_s, 0.08)
    check.add(WINDOW + 1, WINDOW * 0.08, tick=2 * WINDOW)
    assert check.mismatch()


def test_states_read_in_one_tick_are_not_paired():
    """A lock-step robot answers a HOME and the command of the same tick: two states microseconds apart."""
    check = StateRateCheck(PERIOD_S, window=WINDOW)
    seq = 0
    for tick in range(3 * WINDOW):
        seq += 1
        check.add(seq, tick * PERIOD_S, tick)
        if tick % 2:  # every other tick a second answer, 1 ms later
            seq += 1
            check.add(seq, tick * PERIOD_S + 0.001, tick)
    assert check.mismatch() == ""
    assert math.isclose(check.median_interval_s, PERIOD_S - 0.001) or math.isclose(check.median_interval_s, PERIOD_S)


def test_a_robot_that_answers_each_message_is_lock_step_and_not_judged():
    """A lock-step robot steps once per command; its clock shows when its answers were scheduled (under CPU load a
    simulated one's did: medians of 7.5 and 12.6 ms at a 10 ms loop). One state per message: not judged. The same
    clock with two states per message (a free-running robot at twice the rate) is."""
    stamps = [i * 0.0126 for i in range(3 * WINDOW)]
    lock_step = StateRateCheck(0.01, window=WINDOW)
    free_running = StateRateCheck(0.01, window=WINDOW)
    for i, t in enumerate(stamps):
        lock_step.add(i + 1, t, tick=i, prompts=i)  # one message sent per state
        free_running.add(i + 1, t, tick=i, prompts=i // 2)  # one message per two states
    assert lock_step.answers_each_message and lock_step.mismatch() == ""
    assert not free_running.answers_each_message and "79.4 Hz" in free_running.mismatch()


def test_a_slower_looking_robot_on_a_lossy_link_is_not_judged_a_faster_one_is():
    """A lock-step robot whose commands are lost steps less often (two-period intervals with consecutive numbers);
    the link also lost frames from the robot. That is not a slow robot: not judged. A fast-looking one still is."""
    slow, fast = StateRateCheck(PERIOD_S, window=WINDOW), StateRateCheck(PERIOD_S, window=WINDOW)
    for i in range(3 * WINDOW):
        slow.add(i + 1, i * 2 * PERIOD_S, tick=2 * i, prompts=2 * i, frame_gaps=i // 4)
        fast.add(i + 1, i * PERIOD_S / 2, tick=i // 2, prompts=i // 2, frame_gaps=i // 4)
    assert slow.mismatch() == ""
    assert "50.0 Hz" in fast.mismatch()
    clean = StateRateCheck(PERIOD_S, window=WINDOW)  # the same slow robot on a clean link is judged
    for i in range(3 * WINDOW):
        clean.add(i + 1, i * 2 * PERIOD_S, tick=2 * i, prompts=2 * i)
    assert "12.5 Hz" in clean.mismatch()


def test_a_fast_robot_still_shows_when_its_states_arrive_two_per_tick():
    check = StateRateCheck(PERIOD_S, window=WINDOW)
    feed(check, PERIOD_S / 2, 4 * WINDOW)  # every other pair straddles a tick boundary
    assert "50.0 Hz" in check.mismatch()


def test_gaps_restarts_and_glitches_are_not_intervals():
    check = StateRateCheck(PERIOD_S, window=WINDOW)
    feed(check, PERIOD_S, WINDOW + 1, first_seq=SEQ_MAX - 3)  # across the sequence wrap: SEQ_MAX -> 1 is one step
    assert check.mismatch() == ""
    before = check.median_interval_s
    check.add(100, 50.0, tick=10_000)  # a sequence gap: lost frames, not a slow robot
    check.add(101, 90.0, tick=10_001, restarted=True)  # the first state after a HOME: the robot's clock restarted
    check.add(102, float("nan"), tick=10_002)  # a bad timestamp: no interval to it
    check.add(103, 89.0, tick=10_003)  # nor from it
    check.add(104, 88.0, tick=10_004)  # the clock going back
    assert check.median_interval_s == before
    for i in range(2):  # two 5 s glitches in the window: the median holds
        check.add(105 + i, 88.0 + 5.0 * (i + 1), tick=10_005 + i)
    assert check.mismatch() == "" and math.isclose(check.median_interval_s, before)


def test_reset_forgets_the_robot():
    check = StateRateCheck(PERIOD_S, window=WINDOW)
    feed(check, 0.08, 3 * WINDOW)
    assert check.mismatch()
    check.reset()
    assert check.mismatch() == "" and math.isnan(check.median_interval_s)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"period_s": 0.0}, "period_s"), ({"window": 2}, "window"), ({"tolerance": 1.0}, "tolerance")],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StateRateCheck(**{"period_s": PERIOD_S, **kwargs})


@pytest.mark.parametrize("robot_period_s", [0.08, 0.02])
def test_the_loop_ends_the_run_on_a_real_time_robot_at_another_rate(robot_period_s):
    """At 12.5 Hz the loop never saw hold_ticks fresh states in a row and held until max_ticks without a word; at
    50 Hz it ran every command for two robot steps. Both now end the run within a few seconds, saying why."""
    robot = SimRobot(mode="realtime", delay=2, control_period_s=robot_period_s)
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=50, max_ticks=300)
    run = run_loop(DelayAwareP(), seeded_goals([0, 1]), config, robot_spec(), robot=robot)
    last = run.report.transitions[-1]
    assert last.target is LoopState.DONE and "the robot steps every" in last.reason
    measured_s = float(re.search(r"the robot steps every ([0-9.]+) s", last.reason).group(1))
    assert abs(measured_s - robot_period_s) < DEFAULT_RATE_TOLERANCE * robot_period_s  # its rate, measured
    assert run.report.counts[STATE_RATE_MISMATCH] == 1
    assert run.report.ticks < config.max_ticks // 2
    assert all(e.aborted for e in run.report.episodes)  # an episode it was in is aborted, not scored


def test_the_loop_runs_a_real_time_robot_at_its_period_to_the_end():
    robot = SimRobot(mode="realtime", delay=2, control_period_s=PERIOD_S)
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=30, max_ticks=300)
    run = run_loop(DelayAwareP(), seeded_goals([0, 1]), config, robot_spec(), robot=robot)
    assert run.report.transitions[-1].reason == "all goals served"
    assert run.report.counts.get(STATE_RATE_MISMATCH, 0) == 0


class HomedOnEveryState(SimRobot):
    """A robot that sets HOMED on every state it sends (a stuck flag), not only on the answer to a HOME."""

    def _emit(self, msg):
        if isinstance(msg, StateMsg):
            msg = dataclasses.replace(msg, flags=msg.flags | int(StateFlags.HOMED))
        super()._emit(msg)


def test_a_homed_flag_on_every_state_does_not_switch_the_rate_check_off():
    """Before, every HOMED state was taken for a restart of the robot's period clock, so such a robot at 50 Hz ran
    the whole run unchecked; only the answer to a HOME (the loop is HOMING) restarts it now."""
    robot = HomedOnEveryState(mode="realtime", delay=2, control_period_s=PERIOD_S / 2)
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=50, max_ticks=300)
    run = run_loop(DelayAwareP(), seeded_goals([0, 1]), config, robot_spec(), robot=robot)
    assert run.report.counts[STATE_RATE_MISMATCH] == 1
    assert "the robot steps every" in run.report.transitions[-1].reason

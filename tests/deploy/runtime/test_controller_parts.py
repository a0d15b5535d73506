"""The controller's smaller parts alone (the tick recorder, the exit stop, the outbox, the pacer, the episodes' end)
and its per-mode handlers on a controller that is built but not run (a scripted robot on the test's clock). Units:
seconds, metres, command units."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from loop_fixtures import CONTRACT, DelayAwareP, robot_spec
from scripted_robot import POSE, ScriptedClock, ScriptedRobot

from deploy.runtime.episodes import EpisodeTracker
from deploy.runtime.exit_stop import ExitStop
from deploy.runtime.goals import GoalSource
from deploy.runtime.loop import Controller, LoopConfig
from deploy.runtime.loop_resets import UNREQUESTED_HOMES
from deploy.runtime.loop_safe_stop import ESTOP_NOT_ACKNOWLEDGED
from deploy.runtime.outbox import ESTOP_REPEATS
from deploy.runtime.robot_resets import ROBOT_RESET_STORMS
from deploy.runtime.state_check import Verdict
from deploy.runtime.state_machine import LoopState
from deploy.runtime.stop_latch import StopLatch
from deploy.runtime.tick_pacer import TickPacer
from deploy.runtime.tick_record import EMPTY, NO_EPISODE
from deploy.runtime.tick_recorder import TickRecorder, verdict
from deploy.runtime.timing import TickStats
from deploy.wire import CommandMsg, EStopMsg, HeartbeatMsg, HomeMsg, StateFlags, StateMsg

PERIOD_S = 0.04
GOAL = (1.3, 0.75, 0.6)


def state(seq: int, t: float = 0.0, flags: int = 0) -> StateMsg:
    values = np.zeros(CONTRACT.state_dim)
    values[:3] = POSE
    return StateMsg(seq, t, values, flags, ())


def episodes(n: int = 2) -> EpisodeTracker:
    return EpisodeTracker(GoalSource([GOAL] * n), slice(0, 3), success_radius_m=0.05, max_episode_steps=3)


# TickRecorder -------------------------------------------------------------------------------------------------------
def test_the_tick_that_stopped_an_episode_belongs_to_it():
    tracker = episodes()
    recorder = TickRecorder(lambda: 7.5, tracker)
    tracker.start_next()
    bounds = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    hold = CONTRACT.hold()
    running = recorder.record(3, True, bounds, state(1), EMPTY, hold, hold, (), 0.002, False)
    assert (running.t_s, running.tick, running.episode_id, running.verdict) == (7.5, 3, 0, "accepted")
    assert list(running.bound_high) == [1.0, 1.0, 1.0] and list(running.goal) == list(GOAL)
    recorder.note_stop(in_run=True)
    tracker.abort()  # the stop aborts the episode before the tick's record is made
    stopped = recorder.record(4, False, None, None, EMPTY, hold, hold, ("watchdog_stop",), float("nan"), True)
    assert stopped.episode_id == 0 and stopped.verdict == "" and stopped.bound_low.size == 0
    after = recorder.record(5, False, None, None, EMPTY, hold, hold, (), float("nan"), True)
    assert after.episode_id == NO_EPISODE  # remembered for one record only


def test_the_verdict_names_the_rejection_kind():
    assert verdict(state(1), ("implausible_state", "implausible_too_fast")) == "implausible_too_fast"
    assert verdict(None, ("malformed_state", "malformed_state_length")) == "malformed_state_length"
    assert verdict(state(1), ("clipped",)) == "accepted" and verdict(None, ()) == ""


# EpisodeTracker -----------------------------------------------------------------------------------------------------
def test_the_end_of_the_goals_says_how_many_were_aborted():
    tracker = episodes(2)
    tracker.start_next()
    tracker.end(np.array([*GOAL, *[0.0] * 7]), aborted=False)
    assert tracker.all_taken() == "all goals served"
    tracker.start_next()
    tracker.abort()
    tracker.abort()  # nothing under way: nothing recorded
    assert tracker.all_taken() == "all goals taken: 1 served, 1 aborted (see the episodes' results)"


# TickPacer ----------------------------------------------------------------------------------------------------------
def test_the_pacer_keeps_deadlines_and_skips_whole_missed_periods():
    stats = TickStats(PERIOD_S)
    pacer = TickPacer(PERIOD_S, stats)
    pacer.start(10.0)
    assert pacer.wake(10.01) == pytest.approx(0.01)  # woke 10 ms after the period began
    pacer.advance(10.03)
    assert pacer.deadline == pytest.approx(10.08) and stats.overruns == 0
    pacer.advance(10.21)  # 0.09 s past 10.12: periods ending 10.12, 10.16, 10.20 missed
    assert pacer.deadline == pytest.approx(10.24) and stats.overruns == 3


# Outbox and ExitStop (on a controller's link, not run) ---------------------------------------------------------------
def controller(goals: int = 1, **config) -> tuple[Controller, ScriptedRobot, ScriptedClock]:
    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)
    loop_config = LoopConfig(period_s=PERIOD_S, **config)
    goal_source = GoalSource([POSE] * goals)
    ctl = Controller(robot, CONTRACT, DelayAwareP(), robot_spec(), goal_source, loop_config, clock=clock)
    ctl.robot_link.open()
    ctl.enter(LoopState.WAIT_FRESH, "connected")
    ctl.enter(LoopState.HOLD, "fresh state")
    return ctl, robot, clock


def test_the_outbox_notes_each_command_where_it_is_kept():
    ctl, robot, clock = controller()
    ctl.outbox.new_tick()
    clock.t = 2.0
    action = np.array([0.5, 0.0, 0.0, 0.0])
    assert ctl.outbox.command(action) == 2.0 and ctl.outbox.commanded
    assert robot.commands == [1] and ctl.line.last_sent_seq == 1 and list(ctl.path.previous) == list(action)
    ctl.outbox.heartbeat()
    ctl.outbox.estop(repeat=True)
    ctl.outbox.home(2.0, seed=7)
    assert robot.received == Counter({CommandMsg.__name__: 1, HeartbeatMsg.__name__: 1, "EStopMsg": 1, "HomeMsg": 1})
    assert ctl.counts["commands"] == 1 and ctl.counts[ESTOP_REPEATS] == 1
    ctl.outbox.new_tick()
    assert not ctl.outbox.commanded


def test_the_exit_stop_repeats_the_estop_each_period_until_acknowledged():
    ctl, robot, clock = controller()
    robot.ignore_estops = True  # never acknowledges
    stop = ExitStop(ctl.robot_link, StopLatch(Counter(), 1.0), clock, PERIOD_S, ack_timeout_s=0.2)
    assert not stop.send(CONTRACT.hold(), newest_seq=None, offset_s=0.0)
    assert robot.received[EStopMsg.__name__] == 5  # 0.2 s at one per 0.04 s period
    robot2_ctl, robot2, clock2 = controller()
    stop2 = ExitStop(robot2_ctl.robot_link, StopLatch(Counter(), 1.0), clock2, PERIOD_S, ack_timeout_s=0.2)
    assert stop2.send(CONTRACT.hold(), newest_seq=None, offset_s=0.0)
    assert robot2.received[EStopMsg.__name__] == 1 and robot2.received[HomeMsg.__name__] == 0


# The per-mode handlers ----------------------------------------------------------------------------------------------
def test_safe_stop_ends_the_run_when_the_robot_keeps_answering_without_acknowledging():
    ctl, _robot, clock = controller(stop_ack_timeout_s=0.1)
    ctl.enter(LoopState.SAFE_STOP, "test")
    ctl.latch.engage(newest_seq=None, now=0.0, offset_s=0.0)
    accepted = Verdict(True)
    for k in range(3):  # answering for 0.0, 0.05, 0.10 s: within the timeout, the e-stop is repeated
        clock.t = 0.05 * k
        assert not ctl.modes.stopped.on_state(state(k + 1, clock.t), accepted)
    assert ctl.counts[ESTOP_REPEATS] == 3 and ctl.sm.state is LoopState.SAFE_STOP
    clock.t = 0.15
    assert not ctl.modes.stopped.on_state(state(4, clock.t), accepted)
    assert ctl.sm.state is LoopState.DONE and ctl.counts[ESTOP_NOT_ACKNOWLEDGED] == 1


def test_safe_stop_recovers_once_acknowledged_and_times_out_on_silence():
    ctl, _robot, _clock = controller(recover_timeout_s=1.0)
    ctl.enter(LoopState.SAFE_STOP, "test")
    assert ctl.modes.stopped.on_state(state(1, 0.0, int(StateFlags.ESTOP_ACTIVE)), Verdict(True))
    assert ctl.sm.state is LoopState.HOLD
    ctl2, _, clock2 = controller(recover_timeout_s=1.0)
    ctl2.enter(LoopState.SAFE_STOP, "test")
    clock2.t = 0.5
    ctl2.modes.stopped.on_silence([])
    assert ctl2.sm.state is LoopState.SAFE_STOP
    clock2.t = 1.5
    ctl2.modes.stopped.on_silence(["state_length"])
    assert ctl2.sm.state is LoopState.DONE and "only malformed states" in ctl2.sm.history[-1].reason


def test_homing_starts_each_episode_then_the_run_ends_saying_so():
    ctl, robot, clock = controller(goals=1)
    ctl.modes.homing.start_episode()
    assert ctl.sm.state is LoopState.HOMING and robot.received[HomeMsg.__name__] == 1
    assert ctl.intake.checker.home_expected and ctl.homing.unanswered == 1
    assert ctl.modes.homing.on_state(clock.t, state(1, clock.t, int(StateFlags.HOMED)))
    assert ctl.sm.state is LoopState.RUN
    ctl.episodes.end(None, aborted=False)
    ctl.modes.homing.start_episode()
    assert ctl.sm.state is LoopState.DONE and ctl.sm.history[-1].reason == "all goals served"


def test_a_homed_state_with_the_estop_latched_does_not_start_the_episode():
    ctl, _robot, clock = controller()
    ctl.modes.homing.start_episode()
    flags = int(StateFlags.HOMED | StateFlags.ESTOP_ACTIVE)
    assert not ctl.modes.homing.on_state(clock.t, state(1, clock.t, flags))
    assert ctl.sm.state is LoopState.HOMING and ctl.counts["homed_with_estop_active"] == 1


def test_robot_resets_abort_the_episode_and_too_many_end_the_run():
    ctl, _robot, _clock = controller(goals=3, max_robot_resets=1)
    ctl.modes.homing.start_episode()
    ctl.enter(LoopState.RUN, "test")
    record = ctl.modes.resets.unrequested_home(state(1))
    assert ctl.sm.state is LoopState.HOLD and not record.stop and ctl.counts[UNREQUESTED_HOMES] == 1
    assert [r.aborted for r in ctl.episodes.results] == [True]
    record = ctl.modes.resets.restart(state(2))  # the second within the window: one more than allowed
    assert record.stop and ctl.sm.state is LoopState.DONE and ctl.counts[ROBOT_RESET_STORMS] == 1


def test_run_heartbeats_a_late_state_then_holds_from_the_anchor():
    ctl, robot, _clock = controller()
    ctl.modes.homing.start_episode()
    ctl.intake.check(state(1, 0.0, int(StateFlags.HOMED)), 0.0, ctl.robot_link.sent_total)
    ctl.enter(LoopState.RUN, "test")
    assert ctl.modes.run.on_silence(ctl.limits.watchdog_hold_s / 2) is None  # young enough: a heartbeat
    assert robot.received[HeartbeatMsg.__name__] == 1
    record = ctl.modes.run.on_silence(ctl.limits.watchdog_hold_s * 1.5)
    assert record is not None and not record.stop and list(record.sent) == list(CONTRACT.hold())

"""A failing policy leads to a safe stop within ``policy_fault_stop_s``; the e-stop repeats until the robot
acknowledges it, at most once per period; a HOME is not resent before the measured round trip could have answered
it; a robot that latched its e-stop in RUN is stopped, not commanded, and a HOMED state with the e-stop active
starts no episode; after a safe stop, invalid states count as silence for ``recover_timeout_s``; a robot that reboots
before acknowledging gets the e-stop anew and is judged by its new numbering and clock.

Lock-step simulated robot over a pty; the loop period is 10 ms. The shutdown pacing, the invalid states after a stop
and the latched e-stop at home run on a scripted link and the test's clock (``scripted_robot.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from loop_fixtures import CONTRACT, DELAY, DelayAwareP, robot_spec, run_loop, seeded_goals
from scripted_robot import POSE, ScriptedClock, ScriptedRobot

from deploy.runtime.goals import GoalSource
from deploy.runtime.loop import Controller, LoopConfig
from deploy.runtime.state_machine import LoopState
from deploy.wire import (
    HOLD_SEQ,
    AckMsg,
    CommandMsg,
    ErrorCode,
    EStopMsg,
    EStopReason,
    HomeMsg,
    LinkError,
    Message,
    StateFlags,
    StateMsg,
)
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


def test_the_first_home_waits_until_a_state_reports_a_command():
    """Before the first episode no round trip is known, so the wait for a HOME's answer cannot be sized: the loop
    holds until a state's delay line reports one of its holds (before: it homed after ``hold_ticks`` states, and on a
    link slower than ``home_retry_ticks`` resent the first HOME, homing the robot twice). The robot executes no
    command for the first ``DROPPED`` ticks of HOLD. Scripted robot, the test's clock."""
    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)
    robot.drop_commands = True
    dropped, hold_ticks = 10, 3

    def execute_after_a_while(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.HOLD and len(robot.commands) >= dropped:
            robot.drop_commands = False

    config = LoopConfig(period_s=PERIOD_S, hold_ticks=hold_ticks, max_episode_steps=5, max_ticks=300, freeze_gc=False)
    report = _run_scripted(robot, clock, config, on_tick=execute_after_a_while)
    homing = next(t for t in report.transitions if t.target is LoopState.HOMING)
    assert homing.tick > dropped > hold_ticks  # not homed while the line showed only holds
    assert robot.received["HomeMsg"] == 1 and len(report.episodes) == 1
    assert report.counts.get("round_trip_unmeasured", 0) == 0


def test_a_robot_whose_line_never_reports_a_command_is_homed_after_watchdog_stop_s():
    """A robot that reports a delay line but never shows a command of this loop in it is not waited on for ever:
    after ``watchdog_stop_s`` in HOLD the loop homes with the configured wait, counted and logged."""
    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)
    robot.drop_commands = True
    stop_s = 0.3
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=5, max_ticks=300, freeze_gc=False)
    controller = Controller(
        robot, CONTRACT, DelayAwareP(), robot_spec(stop_s=stop_s, hold_s=0.1), GoalSource([POSE]), config, clock=clock
    )
    report = controller.run()
    hold = next(t for t in report.transitions if t.target is LoopState.HOLD)
    homing = next(t for t in report.transitions if t.target is LoopState.HOMING)
    assert abs((homing.tick - hold.tick) - stop_s / PERIOD_S) <= 1  # watchdog_stop_s, plus one period for rounding
    assert report.counts["round_trip_unmeasured"] == 1
    assert robot.received["HomeMsg"] == 1


HOMING_S = 0.5  # seconds a slow arm takes to home: 50 periods, ten times the configured retry wait


@pytest.mark.parametrize("measured", [False, True])
def test_an_arm_that_homes_slowly_is_waited_for_when_its_spec_says_how_long_homing_takes(measured: bool):
    """An arm whose homing motion takes HOMING_S restarts it on every HOME. Without the spec's measured homing_s the
    loop resent HOME after home_retry_ticks (5 ticks, 50 ms) until max_home_retries stopped it: a real arm that homes
    for longer than about 0.5 s could never start an episode. With it, the first HOME is waited on."""
    from dataclasses import replace

    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)
    robot.homing_s, robot.restart_homing = HOMING_S, True
    spec = replace(robot_spec(), homing_s=HOMING_S if measured else 0.0)
    config = LoopConfig(
        period_s=PERIOD_S, max_episode_steps=5, home_retry_ticks=5, max_home_retries=3, max_ticks=400, freeze_gc=False
    )
    controller = Controller(robot, CONTRACT, DelayAwareP(), spec, GoalSource([POSE]), config, clock=clock)
    report = controller.run()
    if measured:
        assert [e.aborted for e in report.episodes] == [False]
        assert report.counts.get("home_retries", 0) == 0 and robot.received["HomeMsg"] == 1
        assert controller.home_retry_ticks() >= 2 * HOMING_S / PERIOD_S  # twice the slowest of it and the round trips
    else:
        assert report.counts["homing_failures"] == 1 and robot.received["HomeMsg"] == 1 + config.max_home_retries
        assert any("never reported HOMED" in t.reason for t in report.transitions)


def test_a_homed_state_after_a_resent_home_is_no_round_trip_sample():
    """The first HOME's answer comes after it was resent: which HOME it answers is unknown, so the time since the
    resend (shorter than the real round trip) does not size later waits (Karn's rule); one answered without a resend
    does."""
    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)
    robot.homing_s = 0.08  # 8 periods; the motion is not restarted by the resend 5 periods in
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=5, home_retry_ticks=5, max_ticks=40, freeze_gc=False)
    waits: list[int] = []

    def note_the_wait(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.RUN and not waits:
            waits.append(controller.home_retry_ticks())

    controller = Controller(
        robot, CONTRACT, DelayAwareP(), robot_spec(), GoalSource([POSE]), config, clock=clock, on_tick=note_the_wait
    )
    report = controller.run()
    assert report.counts["home_retries"] == 1 and report.episodes and not report.episodes[0].aborted
    assert waits == [config.home_retry_ticks]  # before: 7 ticks, from the 3 ticks since the resend
    clock2 = ScriptedClock()
    robot2 = ScriptedRobot(clock2, CONTRACT)
    robot2.homing_s = 0.03  # answered within the configured wait: a clean sample, 3 periods
    waits.clear()
    controller = Controller(
        robot2, CONTRACT, DelayAwareP(), robot_spec(), GoalSource([POSE]), config, clock=clock2, on_tick=note_the_wait
    )
    report = controller.run()
    assert report.counts.get("home_retries", 0) == 0
    assert waits[0] > config.home_retry_ticks  # 2 x (0.03 s + the answer's wait for its tick) > 5 ticks: it counts


NEVER = 10**9  # lose_homed_states: every HOMED state from now on


def test_a_robot_that_never_homes_is_stopped_after_max_home_retries():
    """The robot answers every HOME by homing but its HOMED states never arrive (a broken homing switch looks the
    same): after ``max_home_retries`` resent HOMEs the loop stops safely, aborts the episode, recovers and tries
    the next goal; the run ends when the goals run out instead of resending HOME forever."""
    robot = SimRobot(mode="lockstep", delay=DELAY, control_period_s=PERIOD_S)
    robot.faults.lose_homed_states = NEVER
    retries, goals = 3, [0, 1]
    config = LoopConfig(period_s=PERIOD_S, home_retry_ticks=3, max_home_retries=retries, max_ticks=400)
    run = run_loop(DelayAwareP(), seeded_goals(goals), config, robot_spec(), robot=robot)
    report = run.report
    assert report.transitions[-1].target is LoopState.DONE  # the end says that no goal was served
    assert report.transitions[-1].reason == "all goals taken: 0 served, 2 aborted (see the episodes' results)"
    assert [e.aborted for e in report.episodes] == [True, True]
    assert report.counts["homing_failures"] == len(goals) and report.counts["safe_stops"] == len(goals)
    assert report.counts["home_retries"] == retries * len(goals)
    assert robot.counts["homes"] == (1 + retries) * len(goals)
    stops = [t for t in report.transitions if t.target is LoopState.SAFE_STOP]
    assert all(f"{1 + retries} HOMEs for episode" in t.reason and "homing" in t.reason for t in stops)


def test_a_homed_state_after_some_retries_resets_the_count():
    """HOMED states lost fewer times than ``max_home_retries`` cost retries only; the count starts again at every
    episode, so losses spread over episodes never add up to a stop."""
    robot = SimRobot(mode="lockstep", delay=DELAY, control_period_s=PERIOD_S)
    retries = 2

    def lose_two_per_episode(controller, record):
        if controller.sm.state is LoopState.RUN and controller.episodes.steps == 1:
            robot.faults.lose_homed_states = retries  # the next episode's first two HOMED states are lost

    config = LoopConfig(
        period_s=PERIOD_S, max_episode_steps=5, home_retry_ticks=3, max_home_retries=retries, max_ticks=600
    )
    run = run_loop(
        DelayAwareP(), seeded_goals([0, 1, 2]), config, robot_spec(), robot=robot, on_tick=lose_two_per_episode
    )
    report = run.report
    assert [e.aborted for e in report.episodes] == [False, False, False]
    assert report.counts.get("homing_failures", 0) == 0 and report.counts.get("safe_stops", 0) == 0
    assert report.counts["home_retries"] == 2 * retries  # episodes 2 and 3 each needed both


def test_max_home_retries_must_not_be_negative():
    with pytest.raises(ValueError, match="max_home_retries must be >= 0"):
        LoopConfig(max_home_retries=-1)


def test_the_robot_reset_limit_must_be_sensible():
    with pytest.raises(ValueError, match="max_robot_resets must be >= 0"):
        LoopConfig(max_robot_resets=-1)
    with pytest.raises(ValueError, match="robot_reset_window_s must be > 0"):
        LoopConfig(robot_reset_window_s=0.0)


def test_a_robot_that_goes_silent_while_homing_is_stopped_and_the_run_ends():
    """The cable is cut while a HOME's answer is on its way (replies take 2 periods): no state comes back at all.
    HOMING has no watchdog of its own, so before ``max_home_retries`` the loop resent HOME for good. Now it resends
    it ``max_home_retries`` times, stops safely, and, the robot staying silent, ends the run after
    ``recover_timeout_s``."""
    robot = SimRobot(mode="lockstep", delay=DELAY, control_period_s=PERIOD_S)
    robot.faults.reply_delay_periods = 2
    retries = 2

    def cut_the_cable_once_homing(controller, record):
        if controller.sm.state is LoopState.HOMING:
            robot.faults.link_cut = True

    config = LoopConfig(
        period_s=PERIOD_S, home_retry_ticks=3, max_home_retries=retries, recover_timeout_s=0.2, max_ticks=2000
    )
    spec = robot_spec(hold_s=0.2, stop_s=0.5)
    run = run_loop(DelayAwareP(), seeded_goals([0, 1]), config, spec, robot=robot, on_tick=cut_the_cable_once_homing)
    report = run.report
    assert report.counts["homing_failures"] == 1 and report.counts["home_retries"] == retries
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert f"{1 + retries} HOMEs for episode 0 went unanswered" in stop.reason
    assert report.transitions[-1].target is LoopState.DONE and "stayed silent" in report.transitions[-1].reason
    assert report.ticks < config.max_ticks  # ended by the timeout, not by the tick limit


def test_a_robot_that_latches_its_e_stop_in_run_is_stopped_and_the_episode_aborted():
    """Mid-episode the robot latches an e-stop without the ESTOP_FROM_ROBOT flag (here: an e-stop the runtime sent
    earlier that the robot applies late) and ignores every command. The loop must not keep commanding it and log a
    normal episode: it goes to SAFE_STOP on the first state flagged ESTOP_ACTIVE, aborts the episode, counts why,
    recovers after the re-home and serves the next goal."""
    robot = SimRobot(mode="lockstep", delay=DELAY, control_period_s=PERIOD_S)
    latched: list[int] = []

    def late_estop(controller: Controller, record) -> None:
        if not latched and controller.sm.state is LoopState.RUN and controller.episodes.steps >= 3:
            link = controller.robot_link
            link.send(EStopMsg(link.next_seq(), 0.0, EStopReason.WATCHDOG))
            latched.append(controller.tick)

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=20, max_ticks=300)
    run = run_loop(DelayAwareP(), seeded_goals([0, 1]), config, robot_spec(), robot=robot, on_tick=late_estop)
    report = run.report
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert stop.source is LoopState.RUN and "e-stop active" in stop.reason
    assert stop.tick - latched[0] <= 2  # the lock-step answer to the next command carries the flag
    assert report.counts["robot_estop_active_in_run"] == 1
    first, second = report.episodes
    assert first.aborted and not first.success and first.steps < config.max_episode_steps
    assert not second.aborted and second.steps == config.max_episode_steps  # recovered after the re-home
    # no policy command from the stop until the robot was re-homed (before: the policy ran on, unexecuted)
    resumed = next(t for t in report.transitions if t.target is LoopState.RUN and t.tick > stop.tick)
    assert not [r for r in run.records if stop.tick <= r.tick < resumed.tick and r.obs_flat.size]


def _run_scripted(robot: ScriptedRobot, clock: ScriptedClock, config: LoopConfig, on_tick=None, policy=None):
    """Run the loop against a scripted robot on the test's clock, one goal at the robot's resting pose."""
    controller = Controller(
        robot, CONTRACT, policy or DelayAwareP(), robot_spec(), GoalSource([POSE]), config, on_tick=on_tick, clock=clock
    )
    return controller.run()


class ChattyRobotLink(ScriptedRobot):
    """The scripted robot, answering every message at once with one frame that is no e-stop acknowledgement (an
    ACK, or a state of the wrong length that the runtime drops as malformed)."""

    def __init__(self, clock: ScriptedClock, answer: str) -> None:
        super().__init__(clock, CONTRACT)
        self.answer = answer
        if answer == "malformed_state":
            self.state_length = CONTRACT.state_dim - 1

    def _state(self) -> Message:
        if self.answer == "ack":
            self._seq += 1
            return AckMsg(self._seq, self.clock.t, ErrorCode.OK, "e-stop")
        return super()._state()


@pytest.mark.parametrize("answer", ["ack", "malformed_state"])
def test_the_shutdown_e_stop_goes_out_at_most_once_per_period(answer: str):
    """A robot that answers each e-stop with a frame that does not acknowledge it (an ACK, a malformed state) ends
    every read early. The e-stop is still repeated once per period for ``stop_ack_timeout_s``, not once per frame
    (before: one per 0.1 ms answer, 5000 in 0.5 s)."""
    clock = ScriptedClock()
    link = ChattyRobotLink(clock, answer)
    config = LoopConfig(period_s=PERIOD_S, stop_ack_timeout_s=0.5, max_ticks=1, freeze_gc=False)
    report = _run_scripted(link, clock, config)
    periods = config.stop_ack_timeout_s / PERIOD_S  # 50
    assert periods <= link.received["EStopMsg"] <= periods + 1
    assert report.counts["stop_not_acknowledged"] == 1


@pytest.mark.parametrize("invalid", ["nan", "outside"])
def test_only_invalid_states_after_a_safe_stop_end_the_run_after_recover_timeout_s(invalid: str):
    """The robot's states turn invalid while the loop holds (NaN values, or a position 10 m off): the loop stops
    safely after ``max_implausible_states``; the robot acknowledges the stop but sends nothing valid after it. An
    invalid state is no sign of life: the run ends once no valid state came for ``recover_timeout_s`` (before: only
    silence ran that clock, and the run went on to ``max_ticks``). Scripted robot, the test's clock."""
    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)

    def go_bad_in_hold(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.HOLD:
            robot.invalid = invalid

    recover_s = 0.2
    config = LoopConfig(period_s=PERIOD_S, recover_timeout_s=recover_s, max_ticks=1000, freeze_gc=False)
    report = _run_scripted(robot, clock, config, on_tick=go_bad_in_hold)
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert stop.source is LoopState.HOLD
    assert robot.estop and report.counts.get("estop_repeats", 0) == 0  # acknowledged at once
    end = report.transitions[-1]
    assert end.target is LoopState.DONE and "no valid state" in end.reason and "invalid" in end.reason, end.reason
    assert report.ticks < config.max_ticks  # ended by the timeout, not by the tick limit
    # recover_timeout_s after the stop (20 periods), plus one period for rounding
    assert abs((end.tick - stop.tick) - recover_s / PERIOD_S) <= 1


def test_a_homed_state_with_the_e_stop_active_never_starts_the_episode():
    """The robot's e-stop is latched and a HOME does not release it: it homes and answers HOMED with ESTOP_ACTIVE.
    That does not complete homing (before: the loop entered RUN and asked the policy once before the e-stop check
    stopped it). Each such answer is counted and waited on like no answer; after ``max_home_retries`` the loop stops
    safely, naming the e-stop. Scripted robot, the test's clock."""
    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)
    robot.estop, robot.release_on_home = True, False
    policy = DelayAwareP()
    retries = 2
    config = LoopConfig(
        period_s=PERIOD_S, home_retry_ticks=3, max_home_retries=retries, recover=False, max_ticks=200, freeze_gc=False
    )
    report = _run_scripted(robot, clock, config, policy=policy)
    assert robot.received["HomeMsg"] == 1 + retries
    assert not [t for t in report.transitions if t.target is LoopState.RUN]
    assert policy.calls == 0
    assert report.counts["homed_with_estop_active"] == 1 + retries
    assert report.counts.get("robot_estop_active_in_run", 0) == 0
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert stop.source is LoopState.HOMING and "releases its e-stop" in stop.reason
    assert [e.aborted for e in report.episodes] == [True]


def test_a_robot_that_answers_but_never_acknowledges_the_stop_ends_the_run():
    """After a safe stop the robot keeps sending valid states but never latches the e-stop (no ESTOP_ACTIVE): it
    hears the loop and does not stop, so it may still be executing commands. The e-stop repeats every period for
    ``stop_ack_timeout_s``, then the run ends saying so (before: it repeated the e-stop until ``max_ticks``, with
    nobody told). Scripted robot, the test's clock."""
    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)
    robot.ignore_estops = True

    def nan_in_hold_then_valid(controller: Controller, record) -> None:
        state = controller.sm.state
        robot.invalid = "nan" if state is LoopState.HOLD else ""

    ack_s = 0.2
    config = LoopConfig(period_s=PERIOD_S, stop_ack_timeout_s=ack_s, max_ticks=1000, freeze_gc=False)
    report = _run_scripted(robot, clock, config, on_tick=nan_in_hold_then_valid)
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    end = report.transitions[-1]
    assert end.target is LoopState.DONE and "without acknowledging" in end.reason, end.reason
    assert report.counts["estop_not_acknowledged"] == 1 and not robot.estop
    assert abs((end.tick - stop.tick) - ack_s / PERIOD_S) <= 1  # stop_ack_timeout_s after the stop, +- rounding
    assert report.counts["estop_repeats"] >= ack_s / PERIOD_S - 1  # one e-stop per period meanwhile
    assert not [t for t in report.transitions if t.target is LoopState.RUN]  # never recovered from an unheeded stop


class RebootsWhileStopped(ScriptedRobot):
    """The scripted robot whose link goes down for ``DOWN_S`` as the first e-stop goes out (it hears nothing and sends
    nothing) while its controller reboots: its numbering begins again, its clock reads ``BEHIND_S`` behind the old
    one, and it is not in e-stop until it hears one again (``ignores_after``: it then ignores every e-stop)."""

    DOWN_S = 0.3
    BEHIND_S = 0.1

    def __init__(self, clock: ScriptedClock, ignores_after: bool = False) -> None:
        super().__init__(clock, CONTRACT)
        self.down_until: float | None = None
        self.rebooted = False
        self.ignores_after = ignores_after

    def _up(self) -> bool:
        if self.down_until is None:
            return True
        if self.clock.t < self.down_until:
            return False
        self.down_until, self.rebooted = None, True
        self._seq, self.estop, self.ignore_estops = 0, False, self.ignores_after
        return True

    def send(self, msg: Message) -> int:
        if isinstance(msg, EStopMsg) and not self.rebooted and self.down_until is None:
            self.down_until, self._unanswered = self.clock.t + self.DOWN_S, 0
        return super().send(msg) if self._up() else 0

    def _state(self) -> StateMsg:
        msg = super()._state()
        if not self.rebooted:
            return msg
        return StateMsg(msg.seq, msg.t_s - self.BEHIND_S, msg.state, msg.flags, msg.pending)


def test_a_robot_that_reboots_before_acknowledging_gets_the_e_stop_anew():
    """Seed 2001162: the link went down after a safe stop while the controller rebooted; back up, the robot heard the
    repeated e-stop and acknowledged it at once, but numbered from 1 again: the loop took those states for old
    acknowledgements, timed them on the old clock, and ended the run with estop_not_acknowledged though the robot had
    stopped. Now three states in a row numbered before the stop's confirm the restart; the e-stop goes anew and the
    next acknowledgement counts. Scripted robot, the test's clock."""
    clock = ScriptedClock()
    robot = RebootsWhileStopped(clock)

    def nan_in_hold_until_the_reboot(controller: Controller, record) -> None:
        robot.invalid = "nan" if controller.sm.state is LoopState.HOLD and not robot.rebooted else ""

    config = LoopConfig(period_s=PERIOD_S, stop_ack_timeout_s=0.05, max_ticks=400, freeze_gc=False)
    report = _run_scripted(robot, clock, config, on_tick=nan_in_hold_until_the_reboot)
    assert robot.rebooted and report.counts["safe_stops"] == 1
    assert report.counts.get("estop_not_acknowledged", 0) == 0, report.transitions[-1].reason
    assert report.counts["robot_restarts_in_stop"] == 1 and report.counts["old_estop_acks"] >= 1
    stop = next(i for i, t in enumerate(report.transitions) if t.target is LoopState.SAFE_STOP)
    assert report.transitions[stop + 1].target is LoopState.WAIT_FRESH  # acknowledged: recovered


def test_a_robot_that_reboots_and_then_ignores_the_e_stop_still_ends_the_run():
    """As above, but the rebooted robot ignores the e-stop it gets anew: answering without acknowledging, on its new
    numbering and clock, ends the run ``stop_ack_timeout_s`` after the restart was confirmed."""
    clock = ScriptedClock()
    robot = RebootsWhileStopped(clock, ignores_after=True)

    def nan_in_hold_until_the_reboot(controller: Controller, record) -> None:
        robot.invalid = "nan" if controller.sm.state is LoopState.HOLD and not robot.rebooted else ""

    config = LoopConfig(period_s=PERIOD_S, stop_ack_timeout_s=0.05, max_ticks=400, freeze_gc=False)
    report = _run_scripted(robot, clock, config, on_tick=nan_in_hold_until_the_reboot)
    assert robot.rebooted and report.counts["robot_restarts_in_stop"] == 1
    end = report.transitions[-1]
    assert end.source is LoopState.SAFE_STOP and "without acknowledging" in end.reason, end.reason
    assert report.counts["estop_not_acknowledged"] == 1


class ReplayingRobot(ScriptedRobot):
    """The scripted robot that keeps its first state flagged ESTOP_ACTIVE and, when told, sends it again once (a
    replayed or long-delayed frame: an old number, an old stamp, a valid CRC)."""

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock, CONTRACT)
        self.recorded: Message | None = None
        self.replay_next = False

    def _state(self) -> Message:
        msg = super()._state()
        if msg.flags & StateFlags.ESTOP_ACTIVE and self.recorded is None:
            self.recorded = msg
        if self.replay_next and self.recorded is not None:
            self.replay_next = False
            return self.recorded
        return msg


def test_an_old_estop_active_state_replayed_does_not_acknowledge_a_new_stop():
    """Stop 1: the robot latches and acknowledges. Stop 2: the robot ignores e-stops and replays its old
    acknowledgement. Before: the replay (counted seq_backwards) acknowledged the stop, the loop recovered, re-homed
    and commanded a robot that ignores e-stops. Now only a state numbered after the stop acknowledges it: the e-stop
    is repeated and the run ends with estop_not_acknowledged."""
    clock = ScriptedClock()
    robot = ReplayingRobot(clock)
    stops: list[int] = []

    def misbehave(controller: Controller, record) -> None:
        state = controller.sm.state
        if state is LoopState.RUN and controller.episodes.steps == 2 and len(stops) < 2:
            robot.invalid = "outside"  # implausible states -> a safe stop
            robot.ignore_estops = len(stops) == 1  # the second time, the robot ignores the e-stop
        if state is LoopState.SAFE_STOP and robot.invalid:
            robot.invalid = ""
            stops.append(controller.tick)
            robot.replay_next = len(stops) == 2

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=10, max_ticks=400, freeze_gc=False)
    controller = Controller(
        robot, CONTRACT, DelayAwareP(), robot_spec(), GoalSource([POSE] * 3), config, on_tick=misbehave, clock=clock
    )
    report = controller.run()
    assert len(stops) == 2 and robot.recorded is not None
    assert len(report.episodes) == 2  # no episode after it
    assert report.transitions[-1].source is LoopState.SAFE_STOP  # never recovered from the second stop
    assert report.counts.get("estop_not_acknowledged") == 1
    assert report.counts["old_estop_acks"] >= 1


class RebootsAcrossALinkFailure(ScriptedRobot):
    """The scripted robot whose link fails once (a poll raises LinkError) when told; meanwhile it rebooted: its
    numbering and clock begin again and the arm rests ``MOVED_M`` away in y, inside the workspace, until a HOME
    brings it back to its home pose (the spec's)."""

    MOVED_M = 0.2

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock, CONTRACT)
        self.fail_next_poll = False
        self.rebooted_at_t: float | None = None
        self.homed_since_reboot = False

    def send(self, msg: Message) -> int:
        if isinstance(msg, HomeMsg) and self.rebooted_at_t is not None:
            self.homed_since_reboot = True
        return super().send(msg)

    def poll(self, timeout_s: float) -> list[Message]:
        if self.fail_next_poll:
            self.fail_next_poll = False
            self.rebooted_at_t = self.clock.t
            self._seq, self._unanswered = 0, 0
            self._line.extend([0] * len(self._line))
            raise LinkError("device reports readiness to read but returned no data")
        return super().poll(timeout_s)

    def _state(self) -> Message:
        msg = super()._state()
        if self.rebooted_at_t is None:
            return msg
        state = msg.state.copy()
        if not self.homed_since_reboot:
            state[1] += self.MOVED_M
        return StateMsg(msg.seq, msg.t_s - self.rebooted_at_t, state, msg.flags, msg.pending)


def test_a_link_that_failed_mid_episode_is_re_homed_not_planned_with():
    """Before: the loop reset its state checks on the retried link but stayed in RUN, accepted the rebooted robot's
    first state unchecked (no anchor) and commanded the arm from where it now was, 0.2 m away, in the same episode.
    Now a reopened link aborts the episode and the robot is held and re-homed before the next one."""
    clock = ScriptedClock()
    robot = RebootsAcrossALinkFailure(clock)
    failed_at: list[int] = []

    def fail_once(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.RUN and controller.episodes.steps == 5 and not failed_at:
            failed_at.append(controller.tick)
            robot.fail_next_poll = True

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=20, max_ticks=200, freeze_gc=False)
    goals = GoalSource([POSE, POSE])
    controller = Controller(
        robot, CONTRACT, DelayAwareP(), robot_spec(), goals, config, on_tick=fail_once, clock=clock, sleep=clock.sleep
    )
    report = controller.run()
    assert report.counts["link_errors"] == 1 and report.counts["reconnect_rehomes"] == 1
    hold = next(t for t in report.transitions if t.target is LoopState.HOLD and "reopened" in t.reason)
    assert hold.tick - failed_at[0] <= 2
    first, second = report.episodes
    assert first.aborted and first.steps < config.max_episode_steps
    assert not second.aborted and second.steps == config.max_episode_steps  # homed again, then served
    assert robot.received["HomeMsg"] == 2


class ActionRecordingRobot(ScriptedRobot):
    """The scripted robot that records every command's action (``actions``, float64)."""

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock, CONTRACT)
        self.actions: list[np.ndarray] = []

    def send(self, msg: Message) -> int:
        if isinstance(msg, CommandMsg):
            self.actions.append(np.asarray(msg.action, dtype=np.float64))
        return super().send(msg)


class GlitchAfterHomed(ActionRecordingRobot):
    """The scripted robot whose state right after the HOMED one (read in the same tick) reports the gripper
    ``GLITCH_M`` off in x: a one-state sensor glitch; every command's action is recorded."""

    GLITCH_M = -0.33

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock)
        self._after_homed = False

    def _state(self) -> Message:
        msg = super()._state()
        glitch, self._after_homed = self._after_homed, bool(msg.flags & StateFlags.HOMED)
        if not glitch:
            return msg
        state = msg.state.copy()
        state[0] += self.GLITCH_M
        return StateMsg(msg.seq, msg.t_s, state, msg.flags, msg.pending)


def test_one_glitched_state_read_with_the_homed_one_is_checked_against_it():
    """The arm homes 2 cm inside the workspace's +x face and the goal lies beyond it. The state after the HOMED one,
    read in the same tick, says the gripper is 33 cm further back. Before: the HOMED flag was handed on to that newer
    state, which was taken for the home pose unchecked, and the first command was a full +1 in x (at the gain
    bound 3.7 cm: out of the box). Now the HOMED state is answered first and is the anchor; the state after it waits
    and is checked against it (here a newer one replaces it before its turn)."""
    clock = ScriptedClock()
    robot = GlitchAfterHomed(clock)
    robot.follows_commands = True  # an honest arm: one that stood still under its commands is stopped (issue 31)
    face_x = POSE[0] + 0.02
    spec = robot_spec(box=((1.0, 0.4, 0.3), (face_x, 1.1, 0.9)))
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=10, max_ticks=30, freeze_gc=False)
    goal = GoalSource([(face_x + 0.25, POSE[1], POSE[2])])
    report = Controller(robot, CONTRACT, DelayAwareP(), spec, goal, config, clock=clock).run()
    moves = [a for a in robot.actions if np.any(a[:3] != 0)]
    assert moves, "the policy never commanded: the test would not show the barrier"
    reach_m = moves[0][0] * spec.command_scale_m * spec.actuator_gain_max
    assert POSE[0] + reach_m <= face_x  # the first command keeps even the fastest arm inside
    assert report.episodes and not report.episodes[0].aborted  # the glitch was never planned with, nor a fault


class LateLineRobot(ScriptedRobot):
    """The scripted robot whose delay line, when told, names the command sent ``lag`` commands ago (after a stretch
    that showed only holds): a line reporting an old command late, not a link that slow."""

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock, CONTRACT)
        self.name_old_command_lag = 0

    def _state(self) -> Message:
        msg = super()._state()
        if not self.name_old_command_lag:
            return msg
        old = self.commands[-self.name_old_command_lag]
        self.name_old_command_lag = 0
        return StateMsg(msg.seq, msg.t_s, msg.state, msg.flags, (0, old))


def test_a_line_naming_an_old_command_late_is_no_round_trip_sample():
    """Before: one such state made a 0.6 s 'round trip' (60 periods), so a HOME was resent only after 2 x 0.6 s and a
    robot that went silent while homing was stopped only after max_home_retries of those. A sample longer than
    watchdog_stop_s is no link the loop runs on: counted, not used."""
    clock = ScriptedClock()
    robot = LateLineRobot(clock)
    lag = 60

    def lie_once(controller: Controller, record) -> None:
        steps = controller.episodes.steps
        if controller.sm.state is LoopState.RUN:
            robot.drop_commands = 5 <= steps < 5 + lag  # its line shows only holds meanwhile
            if steps == 5 + lag:
                robot.name_old_command_lag = lag

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=80, home_retry_ticks=5, max_ticks=200, freeze_gc=False)
    spec = robot_spec(hold_s=0.1, stop_s=0.5)
    goals = GoalSource([POSE])
    controller = Controller(robot, CONTRACT, DelayAwareP(), spec, goals, config, on_tick=lie_once, clock=clock)
    report = controller.run()
    assert report.counts["round_trip_outliers"] == 1
    assert controller.home_retry_ticks() == config.home_retry_ticks  # no 0.6 s sample sizes the wait


class ReversedLineRobot(ScriptedRobot):
    """The scripted robot that, when told, reports its delay line newest first."""

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock, CONTRACT)
        self.reverse = False

    def _state(self) -> Message:
        msg = super()._state()
        return StateMsg(msg.seq, msg.t_s, msg.state, msg.flags, msg.pending[::-1]) if self.reverse else msg


def run_lying_from_step_5(robot: ScriptedRobot, clock: ScriptedClock, lie: str):
    """Run one 30-step episode toward a goal 10 cm away (the line holds commands), setting ``robot.<lie>`` at the
    episode's 5th policy step; returns the report."""

    def lie_from_step_5(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.RUN and controller.episodes.steps == 5:
            setattr(robot, lie, True)

    robot.follows_commands = True  # the arm moves toward the goal as its line shows the commands applied
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=30, max_ticks=100, freeze_gc=False)
    goal = GoalSource([(POSE[0] + 0.1, POSE[1], POSE[2])])
    controller = Controller(
        robot, CONTRACT, DelayAwareP(), robot_spec(), goal, config, on_tick=lie_from_step_5, clock=clock
    )
    return controller.run()


def test_a_line_in_another_order_than_the_commands_were_sent_is_implausible():
    """Before: the policy was given the history in the robot's (reversed) order and nothing was counted."""
    clock = ScriptedClock()
    report = run_lying_from_step_5(ReversedLineRobot(clock), clock, "reverse")
    assert report.counts["implausible_pending_order"] >= 1
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert "implausible_pending_order" in stop.reason


class RelistingRobot(ScriptedRobot):
    """The scripted robot that, when told, keeps reporting the command it had applied last as the oldest entry of
    its line (a stuck entry: firmware that stopped clearing it), in the order sent."""

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock, CONTRACT)
        self.relist = False
        self._applied: int | None = None

    def send(self, msg: Message) -> int:
        if isinstance(msg, CommandMsg) and self._line[0] != HOLD_SEQ and not self.relist:
            self._applied = self._line[0]  # the full line's oldest command leaves it: applied
        return super().send(msg)

    def _state(self) -> Message:
        msg = super()._state()
        if not self.relist or self._applied is None:
            return msg
        return StateMsg(msg.seq, msg.t_s, msg.state, msg.flags, (self._applied, *msg.pending[1:]))


def test_a_line_that_lists_an_applied_command_again_is_implausible():
    """Before: a line naming again a command its previous line showed applied was in order and named a command
    sent, so it passed: the policy got an action history that was over and the barrier counted a move made. Now
    every such state is implausible and the robot is stopped."""
    clock = ScriptedClock()
    report = run_lying_from_step_5(RelistingRobot(clock), clock, "relist")
    assert report.counts["implausible_pending_not_fifo"] >= 1
    assert report.counts.get("implausible_unsent_pending", 0) == report.counts.get("implausible_pending_order", 0) == 0
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert "implausible_pending_not_fifo" in stop.reason


class FrozenRobot(ScriptedRobot):
    """The scripted robot whose sender, when told, repeats its last state frame unchanged (same number)."""

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock, CONTRACT)
        self.freeze = False
        self._last: Message | None = None

    def _state(self) -> Message:
        if self.freeze and self._last is not None:
            return self._last
        self._last = super()._state()
        return self._last


def test_a_frozen_sender_is_named_as_one_not_as_silence_or_lost_frames():
    """Before: a robot repeating one state frame was reported as 'it stayed silent', and every repeat was counted as
    a lost frame (robot_frame_gaps)."""
    clock = ScriptedClock()
    robot = FrozenRobot(clock)

    def freeze_in_run(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.RUN and controller.episodes.steps == 3:
            robot.freeze = True

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=20, recover_timeout_s=0.5, max_ticks=400, freeze_gc=False)
    spec = robot_spec(hold_s=0.05, stop_s=0.1)
    controller = Controller(
        robot, CONTRACT, DelayAwareP(), spec, GoalSource([POSE]), config, on_tick=freeze_in_run, clock=clock
    )
    report = controller.run()
    assert report.counts["stale_seq"] > 10
    assert report.counts.get("robot_frame_gaps", 0) == 0
    last = report.transitions[-1]
    assert "repeats of one state" in last.reason and "frozen sensor or a stuck sender" in last.reason, last.reason


class RebootsWhileHoming(ScriptedRobot):
    """The scripted robot that reboots on the second HOME it receives (numbering and clock begin again, no HOMED
    state comes) and, once told to, reports its arm ``JUMP_M`` away in y."""

    JUMP_M = 0.3

    def __init__(self, clock: ScriptedClock) -> None:
        super().__init__(clock, CONTRACT)
        self.rebooted_at_t: float | None = None
        self.jumped = False

    def send(self, msg: Message) -> int:
        answer = super().send(msg)
        if isinstance(msg, HomeMsg) and self.received["HomeMsg"] == 2:  # the second episode's HOME: it reboots
            self.rebooted_at_t, self._seq, self._homing_since = self.clock.t, 0, None
        return answer

    def _state(self) -> Message:
        msg = super()._state()
        if self.rebooted_at_t is None:
            return msg
        state = msg.state.copy()
        state[1] += self.JUMP_M if self.jumped else 0.0
        return StateMsg(msg.seq, msg.t_s - self.rebooted_at_t, state, msg.flags, msg.pending)


def test_a_home_sent_before_a_robot_restart_does_not_excuse_motion_after_it():
    """A robot reboots while HOMING (its HOMED state never comes); the restart is confirmed and the loop holds. Before,
    the checker still expected the home motion from the HOME sent before the reboot, so a 0.3 m jump in HOLD was
    accepted as the robot homing; now the restart voids that HOME and the jump is implausible."""
    clock = ScriptedClock()
    robot = RebootsWhileHoming(clock)
    seen: list[str] = []

    def script(controller: Controller, record) -> None:
        state = controller.sm.state
        if state is LoopState.HOLD and robot.rebooted_at_t is not None and not robot.jumped:
            seen.append("hold after the restart")
            robot.jumped = True

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=5, max_ticks=120, freeze_gc=False)
    spec = robot_spec(hold_s=0.1, stop_s=0.3)
    controller = Controller(
        robot, CONTRACT, DelayAwareP(), spec, GoalSource([POSE] * 3), config, on_tick=script, clock=clock
    )
    report = controller.run()
    assert seen and report.counts["robot_restarts"] >= 1
    assert report.counts.get("implausible_too_fast", 0) + report.counts.get("implausible_unexplained_motion", 0) >= 1


class HomesOffHome(ActionRecordingRobot):
    """The scripted robot whose first ``glitches`` HOMED states report the gripper ``OFF_M`` above its home (a
    sensor glitch on the state the episode is planned from); every command's action is recorded."""

    OFF_M = 0.05

    def __init__(self, clock: ScriptedClock, glitches: float) -> None:
        super().__init__(clock)
        self.glitches = glitches

    def _state(self) -> Message:
        msg = super()._state()
        if not msg.flags & StateFlags.HOMED or self.glitches <= 0:
            return msg
        self.glitches -= 1
        state = msg.state.copy()
        state[2] += self.OFF_M
        return StateMsg(msg.seq, msg.t_s, state, msg.flags, msg.pending)


def test_a_homed_state_away_from_the_spec_home_is_not_planned_from():
    """Before: the HOMED state anchored the episode whatever it said; one that read 5 cm high planned the first
    commands downward, toward a goal the arm was already at. Now it is rejected (homed_off_home), HOME is resent and
    the episode is planned from the real HOMED state: the policy, aiming at the home, commands nothing."""
    clock = ScriptedClock()
    robot = HomesOffHome(clock, glitches=1)
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=10, max_ticks=200, freeze_gc=False)
    controller = Controller(robot, CONTRACT, DelayAwareP(), robot_spec(), GoalSource([POSE]), config, clock=clock)
    report = controller.run()
    assert report.counts["implausible_homed_off_home"] == 1
    assert robot.received["HomeMsg"] == 2 and report.counts["home_retries"] == 1
    (episode,) = report.episodes
    assert not episode.aborted and episode.steps == config.max_episode_steps
    assert robot.actions and np.allclose(np.array(robot.actions)[:, :3], 0.0, atol=1e-6)


def test_a_robot_whose_home_moved_is_stopped_with_the_fix():
    clock = ScriptedClock()
    robot = HomesOffHome(clock, glitches=math.inf)
    config = LoopConfig(
        period_s=PERIOD_S, max_episode_steps=10, home_retry_ticks=5, max_home_retries=3, max_ticks=200, freeze_gc=False
    )
    controller = Controller(robot, CONTRACT, DelayAwareP(), robot_spec(), GoalSource([POSE]), config, clock=clock)
    report = controller.run()
    assert report.counts["homing_failures"] == 1
    assert [(e.aborted, e.steps) for e in report.episodes] == [(True, 0)]  # never planned from the off-home state
    assert np.allclose(np.array(robot.actions), 0.0)  # only holds were ever commanded
    assert report.counts["implausible_homed_off_home"] == 1 + config.max_home_retries
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert "4 HOMED states lay away from the spec's home [1.3418, 0.7491, 0.5347] (the last 0.0500 m" in stop.reason
    assert "re-run `robot-grpo calibrate`" in stop.reason
    assert report.transitions[-1].reason == "all goals taken: 0 served, 1 aborted (see the episodes' results)"


def test_the_homing_failure_hint_names_only_the_failing_episodes_homed_states():
    """Episode 0's one off-home HOMED state was rejected and its HOME resent, and it was served; episode 1's robot then
    never homes at all. Before: the stop's hint blamed the home pose for episode 1 ('1 HOMED states lay away ...:
    re-run calibrate'), counting over the whole run; now it names the failing episode's own answers (none)."""
    clock = ScriptedClock()
    robot = HomesOffHome(clock, glitches=1)

    def stop_homing_in_episode_1(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.RUN:  # episode 0 homed; no later homing completes
            robot.homing_s = math.inf

    config = LoopConfig(
        period_s=PERIOD_S, max_episode_steps=10, home_retry_ticks=5, max_home_retries=3, max_ticks=300, freeze_gc=False
    )
    goals = GoalSource([POSE, POSE])
    controller = Controller(
        robot, CONTRACT, DelayAwareP(), robot_spec(), goals, config, on_tick=stop_homing_in_episode_1, clock=clock
    )
    report = controller.run()
    assert report.counts["implausible_homed_off_home"] == 1  # episode 0's
    assert [e.aborted for e in report.episodes] == [False, True]
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert "HOMEs for episode 1 went unanswered" in stop.reason
    assert "lay away from the spec's home" not in stop.reason, stop.reason


class AnswersEveryHome(ScriptedRobot):
    """The scripted robot that answers every HOME it receives with its own HOMED state ``homing_s`` later (a resent
    HOME is answered twice, the second time after the first commands of the episode went out)."""

    def __init__(self, clock: ScriptedClock, homing_s: float) -> None:
        super().__init__(clock, CONTRACT)
        self.homing_s = math.inf  # the base class's single homing timer never fires
        self.answer_after_s = homing_s
        self._homes: list[float] = []  # test-clock times of the HOMEs still to be answered

    def send(self, msg: Message) -> int:
        if isinstance(msg, HomeMsg):
            self._homes.append(self.clock.t)
        return super().send(msg)

    def _state(self) -> Message:
        msg = super()._state()
        if not self._homes or self.clock.t - self._homes[0] < self.answer_after_s:
            return msg
        self._homes.pop(0)
        return StateMsg(msg.seq, msg.t_s, msg.state, msg.flags | StateFlags.HOMED, msg.pending)


def test_a_resent_homes_late_answer_in_run_is_no_unrequested_home():
    """The first HOME is answered after it was resent, and the resent one is answered too, in RUN. That answer was
    asked for (the robot homed before any command of the episode reached it): counted, the episode goes on."""
    clock = ScriptedClock()
    robot = AnswersEveryHome(clock, homing_s=0.08)  # 8 periods; resent after 5
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=20, home_retry_ticks=5, max_ticks=60, freeze_gc=False)
    report = _run_scripted(robot, clock, config)
    assert robot.received["HomeMsg"] == 2 and report.counts["home_retries"] == 1
    assert report.counts["late_home_answers"] == 1
    assert report.counts.get("unrequested_homes", 0) == 0
    assert [(e.aborted, e.steps) for e in report.episodes] == [(False, config.max_episode_steps)]


def test_a_third_homed_answer_to_two_homes_is_unrequested():
    """The same robot, told to report HOMED once more late in the episode: no HOME awaits that answer, so the
    episode is aborted and the robot re-homed."""
    clock = ScriptedClock()
    robot = AnswersEveryHome(clock, homing_s=0.08)

    def one_more_homed(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.RUN and controller.episodes.steps == 15 and len(robot._homes) == 0:
            robot._homes.append(-math.inf)  # answered at once

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=20, home_retry_ticks=5, max_ticks=120, freeze_gc=False)
    controller = Controller(
        robot,
        CONTRACT,
        DelayAwareP(),
        robot_spec(),
        GoalSource([POSE, POSE]),
        config,
        clock=clock,
        on_tick=one_more_homed,
    )
    report = controller.run()
    assert report.counts["late_home_answers"] >= 1
    assert report.counts["unrequested_homes"] >= 1
    assert report.episodes[0].aborted and report.episodes[0].steps >= 15


class OutageRobot(ScriptedRobot):
    """The scripted robot behind a link that goes dead for ``outage_s`` seconds once episode 0 runs: nothing reaches
    it and nothing comes back (its e-stops are lost too). Its first ``unheard`` answers after the outage are states it
    made before it heard the repeated e-stop (not flagged ESTOP_ACTIVE); then it latches the stop as usual."""

    def __init__(self, clock: ScriptedClock, outage_s: float, unheard: int = 2) -> None:
        super().__init__(clock, CONTRACT)
        self.outage_s = outage_s
        self.unheard = unheard
        self.outage_until: float | None = None

    def cut(self) -> None:
        self.outage_until = self.clock.t + self.outage_s

    def _dead(self) -> bool:
        return self.outage_until is not None and self.clock.t < self.outage_until

    def send(self, msg: Message) -> int:
        if self._dead():
            return 0  # lost on the dead link
        if isinstance(msg, EStopMsg) and self.outage_until is not None and self.unheard > 0:
            self.unheard -= 1  # still answering from before it heard the e-stop: not latched yet
            self._unanswered += 1
            return 0
        return super().send(msg)


@pytest.mark.parametrize("outage_s", [1.0, 2.0])
def test_a_link_outage_does_not_end_the_run_as_an_unacknowledged_stop(outage_s: float):
    """Issue 31: in SAFE_STOP after a link outage the time without acknowledgement was counted from the stop, not
    from when the robot could first hear the repeated e-stop: a state it made before hearing one, read more than
    ``stop_ack_timeout_s`` after the stop, ended the run with a false message (1 in 13 outages of 1-2 s). Now the
    robot's first state after the silence starts that clock: the robot acknowledges, recovers and serves the goals."""
    clock = ScriptedClock()
    robot = OutageRobot(clock, outage_s)
    robot.follows_commands = True

    def cut_in_run(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.RUN and controller.episodes.steps == 3 and robot.outage_until is None:
            robot.cut()

    config = LoopConfig(
        period_s=PERIOD_S, max_episode_steps=10, stop_ack_timeout_s=0.5, max_ticks=2000, freeze_gc=False
    )
    spec = robot_spec(hold_s=0.025, stop_s=0.1)
    report = Controller(
        robot, CONTRACT, DelayAwareP(), spec, GoalSource([POSE] * 3), config, on_tick=cut_in_run, clock=clock
    ).run()
    assert robot.outage_until is not None
    assert report.counts.get("estop_not_acknowledged", 0) == 0, report.transitions[-1].reason
    stops = [t for t in report.transitions if t.target is LoopState.SAFE_STOP]
    assert len(stops) == 1 and "watchdog" in stops[0].reason, [t.reason for t in stops]
    assert [e.aborted for e in report.episodes] == [True, False, False]  # the cut episode; then served

"""The controller's parts, each alone: the inbox, the stop latch, the reset history, homing, the policy worker and
guard, the intake's rejection escalation. Units: seconds, control steps."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest
from loop_fixtures import CONTRACT, robot_spec

from deploy.runtime.command_line import CommandLine
from deploy.runtime.homing import HomeWait, Homing
from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.policy_guard import LATE, RAISED, PolicyGuard
from deploy.runtime.policy_worker import PolicyWorker
from deploy.runtime.robot_resets import ResetHistory
from deploy.runtime.state_check import HOMED_OFF_HOME
from deploy.runtime.state_inbox import StateInbox
from deploy.runtime.state_intake import (
    HOME_DOUBT_M,
    HOME_NOT_REACHED,
    HOME_NOT_REACHED_REASON,
    NOT_FOLLOWING_REASON,
    REJECTED_TOO_OFTEN,
    StateIntake,
)
from deploy.runtime.stop_latch import OLD_ESTOP_ACKS, StopLatch
from deploy.wire import StateFlags, StateMsg

PERIOD_S = 0.04


def state(seq: int, flags: int = 0) -> StateMsg:
    return StateMsg(seq, seq * PERIOD_S, np.zeros(CONTRACT.state_dim), flags, ())


# StateInbox ---------------------------------------------------------------------------------------------------------
def test_inbox_answers_the_newest_state_and_counts_what_it_skips():
    counts: Counter[str] = Counter()
    inbox = StateInbox(counts, PERIOD_S)
    assert inbox.put(state(1), 0.0) and inbox.put(state(2), 0.01)
    assert not inbox.put(state(2), 0.02)  # the same number again: never read
    assert not inbox.put(state(1), 0.03)  # older while a newer waits: dropped
    assert inbox.take()[1].seq == 2 and inbox.take() is None
    assert counts == Counter(states=4, skipped_states=1, stale_seq=1, old_seq=1)
    assert inbox.repeats_since_fresh == 0  # the old one was a new number, not a repeat


def test_inbox_answers_a_homed_state_first_and_the_newest_after_it_next():
    counts: Counter[str] = Counter()
    inbox = StateInbox(counts, PERIOD_S)
    inbox.put(state(1, int(StateFlags.HOMED)), 0.0)
    inbox.put(state(2), 0.01)
    inbox.put(state(3), 0.02)  # replaces 2 behind the HOMED one
    assert [inbox.take()[1].seq, inbox.take()[1].seq] == [1, 3]
    assert counts["skipped_states"] == 1


# StopLatch ----------------------------------------------------------------------------------------------------------
def test_stop_latch_times_the_answers_from_the_first_state_after_a_silence():
    latch = StopLatch(Counter(), silence_s=0.1)
    latch.engage(newest_seq=10, now=1.0, offset_s=0.5)  # the robot's clock runs 0.5 s behind the loop's
    assert not latch.acked
    assert latch.answering_s(5.0, stamp_s=0.45) == 0.0  # made at 0.95 s, before the stop: still in a slow link
    assert latch.answering_s(5.01, stamp_s=4.5) == 0.0  # the first made after it: 4 s of outage are not counted
    assert latch.answering_s(5.05, stamp_s=4.54) == pytest.approx(0.04)
    assert latch.answering_s(6.0, stamp_s=5.5) == 0.0  # 0.95 s of silence: the robot may not have heard the repeats
    latch.acknowledge_if(9)  # numbered before the stop: a replay, no acknowledgement
    assert not latch.acked and latch.counts[OLD_ESTOP_ACKS] == 1
    latch.acknowledge_if(11)
    assert latch.acked


def test_stop_latch_judges_stamps_by_the_lowest_offset_of_the_link():
    """Seed 310299: the checker re-learnt its offset after a stop while replies came 0.28 s late, so it held the
    latency; states made before the next stop read as made after it and the run ended with a false claim."""
    latch = StopLatch(Counter(), silence_s=0.1)
    latch.engage(newest_seq=1, now=1.0, offset_s=0.5)  # learnt with no latency
    latch.acknowledge_if(2)
    latch.engage(newest_seq=20, now=3.0, offset_s=0.78)  # learnt under a steady 0.28 s reply latency
    for i in range(28):  # made 2.5 .. 2.77 s on the loop's clock (before the stop), arriving 0.28 s later
        assert latch.answering_s(3.0 + 0.01 * i, stamp_s=2.22 + 0.01 * i) == 0.0
    assert latch.answering_s(3.29, stamp_s=2.51) == 0.0  # the first made after the stop starts the clock
    assert latch.answering_s(3.34, stamp_s=2.56) == pytest.approx(0.05)
    latch.forget_numbering()  # a reopened port: the robot's clock may have begun again
    latch.engage(newest_seq=None, now=10.0, offset_s=9.0)
    assert latch.answering_s(10.01, stamp_s=1.005) == 0.0 and latch.answering_s(10.06, stamp_s=1.055) > 0.0


def test_stop_latch_takes_an_offset_far_above_the_lowest_as_a_restarted_clock():
    latch = StopLatch(Counter(), silence_s=0.1)
    latch.engage(newest_seq=1, now=1.0, offset_s=0.5)
    latch.engage(newest_seq=9, now=5.0, offset_s=4.5)  # 4 s higher: no latency is that steady; the clock restarted
    assert latch.answering_s(5.01, stamp_s=0.505) == 0.0 and latch.answering_s(5.06, stamp_s=0.555) > 0.0


def test_stop_latch_confirms_a_restart_and_takes_the_new_numbering_and_clock():
    """Seed 2001162: the controller rebooted while the stop went unanswered (a link outage); its states, numbered
    from 1 again and flagged ESTOP_ACTIVE, were taken for old acknowledgements and timed on the old clock."""
    counts: Counter[str] = Counter()
    latch = StopLatch(counts, silence_s=0.1, resync_states=3)
    latch.engage(newest_seq=15, now=1.0, offset_s=0.5)  # the old clock runs 0.5 s behind the loop's
    assert not latch.restarted(1, stamp_s=0.10, now=2.00)  # the new clock: 1.9 s behind the loop's
    latch.acknowledge_if(1)
    assert not latch.restarted(2, stamp_s=0.11, now=2.01) and not latch.acked
    assert latch.restarted(3, stamp_s=0.12, now=2.02)  # three in a row, each after the one before
    latch.reengage(now=2.02)
    assert not latch.acked
    assert latch.answering_s(2.03, stamp_s=0.12) == 0.0  # made at 2.02 s on the new clock: not after the new stop
    assert latch.answering_s(2.05, stamp_s=0.14) == 0.0  # the first made after it starts the clock
    assert latch.answering_s(2.07, stamp_s=0.16) == pytest.approx(0.02)
    latch.acknowledge_if(3)  # numbered with the chain: no acknowledgement of the stop sent anew
    assert not latch.acked and counts[OLD_ESTOP_ACKS] == 2
    latch.acknowledge_if(4)
    assert latch.acked


def test_stop_latch_sees_no_restart_in_old_states_among_live_ones():
    """Replayed or late states numbered before the stop, between the live numbering's: no restart; a robot that
    keeps answering without acknowledging is still timed (estop_ignored)."""
    latch = StopLatch(Counter(), silence_s=0.1, resync_states=3)
    latch.engage(newest_seq=15, now=1.0, offset_s=0.5)
    arrivals = [(12, 0.40), (16, 0.52), (13, 0.41), (17, 0.53), (14, 0.42), (18, 0.54)]  # old, live, old, ...
    assert not any(latch.restarted(seq, stamp, 1.0 + 0.01 * i) for i, (seq, stamp) in enumerate(arrivals))
    assert not latch.restarted(5, stamp_s=0.3, now=1.1) and not latch.restarted(4, stamp_s=0.31, now=1.11)
    assert not latch.restarted(6, stamp_s=0.29, now=1.12)  # stamped before the one before: a new chain of one
    for i in range(13):  # the live numbering goes on, each state made 0.5 s before it arrives
        now, stamp = 1.2 + 0.05 * i, 0.7 + 0.05 * i
        assert not latch.restarted(19 + i, stamp, now)
        answering = latch.answering_s(now, stamp)
    assert answering == pytest.approx(0.6)  # answering since 1.2 s, never acknowledging
    with pytest.raises(ValueError, match="resync_states"):
        StopLatch(Counter(), silence_s=0.1, resync_states=1)


def test_a_stop_the_robot_made_itself_needs_no_acknowledgement():
    latch = StopLatch(Counter(), silence_s=0.1)
    latch.engage(newest_seq=3, now=0.0, offset_s=0.0, needs_ack=False)
    assert latch.acked


# ResetHistory -------------------------------------------------------------------------------------------------------
def test_reset_history_ends_the_run_past_the_allowance_within_the_window():
    history = ResetHistory(max_resets=2, window_s=60.0)
    assert history.add(0.0, "robot_restart") == "" and history.add(30.0, "unrequested_home") == ""
    assert history.add(70.0, "robot_restart") == ""  # the first left the window (70 - 0 > 60): 2 in it
    end = history.add(75.0, "robot_restart")  # 30, 70, 75: 3 within 60 s
    assert "3 times within 60 s" in end and "robot_restart: 2" in end


# Homing -------------------------------------------------------------------------------------------------------------
def test_homing_waits_resends_and_gives_up():
    config = LoopConfig(home_retry_ticks=5, max_home_retries=1)
    homing = Homing(config, PERIOD_S, homing_s=0.0)
    homing.sent(tick=10, t=0.0)
    assert homing.wait(14) is HomeWait.WAIT and homing.wait(15) is HomeWait.RESEND
    homing.resent()
    homing.sent(tick=15, t=0.2)
    assert homing.wait(20) is HomeWait.GIVE_UP  # 1 resend without an answer = max_home_retries


def test_homing_waits_twice_the_slowest_round_trip_and_samples_only_unrepeated_homes():
    homing = Homing(LoopConfig(home_retry_ticks=5), PERIOD_S, homing_s=0.3)
    assert homing.retry_ticks() == 15  # 2 x 0.3 s / 0.04 s
    homing.sent(tick=0, t=1.0)
    homing.answered(1.5)
    assert list(homing.round_trips) == [0.5] and homing.retry_ticks() == 25  # 2 x 0.5 / 0.04
    homing.resent()
    homing.answered(9.0)  # after a resend it is unknown which HOME it answers (Karn)
    assert list(homing.round_trips) == [0.5]


def test_a_homed_state_no_home_awaits_in_run_is_the_robots_own():
    homing = Homing(LoopConfig(), PERIOD_S, homing_s=0.0)
    homing.sent(tick=0, t=0.0)
    assert homing.asked_for(in_run=False, accepted=True) == (True, False)  # HOMING: the answer
    assert homing.asked_for(in_run=True, accepted=True) == (False, False)  # RUN, none awaited: homed by itself
    homing.sent(tick=5, t=0.2)
    assert homing.asked_for(in_run=True, accepted=True) == (True, True)  # a resent HOME's late answer


# PolicyWorker and PolicyGuard ---------------------------------------------------------------------------------------
def test_the_worker_returns_in_time_and_a_late_call_is_not_waited_for():
    worker = PolicyWorker()
    worker.submit(lambda x: x + 1, 1)
    assert worker.wait(1.0) and worker.take() == (2, None)
    release = threading.Event()
    worker.submit(lambda x: release.wait(), None)
    assert not worker.wait(0.01) and worker.busy
    release.set()
    assert worker.wait(1.0) and not worker.take()[1]
    worker.close()


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_late_call_holds_counts_from_its_start_and_its_answer_is_dropped():
    release = threading.Event()
    calls: list[int] = []

    def policy(obs: np.ndarray) -> np.ndarray:
        calls.append(1)
        if len(calls) == 1:
            release.wait(5.0)
        return np.zeros((1, CONTRACT.action_dim))

    clock = Clock()
    clock.t = 10.0
    guard = PolicyGuard(policy, CONTRACT.action_dim, PERIOD_S, clock, worker=PolicyWorker())
    flat = np.zeros(CONTRACT.observation_dim, dtype=np.float32)
    action, fault = guard.infer(flat, wait_s=0.01)
    assert action is None and fault == LATE
    clock.t = 10.08
    assert guard.infer(flat, wait_s=0.01) == (None, LATE)  # still running: not called again
    assert len(calls) == 1 and guard.failing_for(clock.t) == pytest.approx(0.08)  # from the call's start
    release.set()
    guard.worker.wait(1.0)  # type: ignore[union-attr]
    action, fault = guard.infer(flat, wait_s=1.0)  # the late answer is dropped; a fresh call answers
    assert fault == "" and len(calls) == 2 and guard.failing_for(clock.t) == 0.0
    guard.close()


def test_a_call_that_raises_on_the_worker_is_a_raised_fault(caplog: pytest.LogCaptureFixture):
    def broken(obs: np.ndarray) -> np.ndarray:
        raise RuntimeError("engine lost")

    guard = PolicyGuard(broken, CONTRACT.action_dim, PERIOD_S, Clock(), worker=PolicyWorker())
    action, fault = guard.infer(np.zeros(CONTRACT.observation_dim, dtype=np.float32), wait_s=1.0)
    assert action is None and fault == RAISED and "engine lost" in caplog.text
    guard.close()


# StateIntake: what a rejection costs ----------------------------------------------------------------------------------
def _intake(**config) -> StateIntake:
    counts: Counter[str] = Counter()
    line = CommandLine(CONTRACT, 2, counts)
    return StateIntake(robot_spec(), CONTRACT, PERIOD_S, LoopConfig(**config), line, counts)


def test_rejections_stop_in_a_row_too_often_or_at_once():
    intake = _intake(max_implausible_states=3, rejection_window_states=10, max_rejected_in_window=4)
    intake.last_valid_t = 0.0
    assert intake.reject("implausible_too_fast", 0.01, watchdog_stop_s=1.0) == ""
    assert intake.reject("implausible_too_fast", 0.02, watchdog_stop_s=1.0) == ""
    assert "3 implausible" in intake.reject("implausible_too_fast", 0.03, watchdog_stop_s=1.0)
    intake = _intake(max_implausible_states=3, rejection_window_states=10, max_rejected_in_window=3)
    intake.last_valid_t = 0.0
    for _ in range(2):  # rejected, accepted, rejected, accepted ...: never 3 in a row
        assert intake.reject("implausible_seq_gap", 0.01, watchdog_stop_s=1.0) == ""
        intake.count_accepted()
    assert "3 of the last 5 states were rejected" in intake.reject("implausible_seq_gap", 0.01, 1.0)
    assert intake.counts[REJECTED_TOO_OFTEN] == 1
    intake = _intake()
    intake.last_valid_t = 0.0
    assert "blocked" in intake.reject(NOT_FOLLOWING_REASON, 0.01, watchdog_stop_s=1.0)  # at once
    assert "no valid state for 2.000 s" in intake.reject("implausible_too_fast", 2.0, watchdog_stop_s=1.0)


def test_a_stall_the_guard_saw_keeps_counting_while_the_call_runs_and_ends_with_it():
    """A tick with no fresh state asks nothing; the loop still stops a stall it saw (``RunTicks.on_silence``)."""
    now = [0.0]
    release = threading.Event()
    guard = PolicyGuard(lambda flat: release.wait(), 4, 0.01, clock=lambda: now[0], worker=PolicyWorker())
    assert guard.stalled_for(0.0) == 0.0  # nothing asked yet
    action, fault = guard.infer(np.zeros((1, 3), dtype=np.float32), wait_s=0.0)
    assert action is None and fault == LATE
    now[0] = 0.3
    assert guard.stalled_for(now[0]) == pytest.approx(0.3)  # from the call's start, while it still runs
    release.set()
    assert guard.worker is not None and guard.worker.wait(1.0)
    assert guard.stalled_for(now[0]) == 0.0  # the call returned: nothing is stalled
    guard.close()


def test_a_homed_answer_off_home_after_unconfirmed_motion_stops_at_once():
    """Seed 310103: the motors stalled near an episode's end; its HOME's HOMED answers lay where the arm stalled and
    were only resent for (1.2 s of robot time). With motion unconfirmed when the HOME went out, the first one stops."""
    spec = robot_spec()
    state = np.zeros(CONTRACT.state_dim)
    state[slice(*CONTRACT.position_slice)] = spec.home_position_m
    for pushed_m, kind in ((0.02, HOME_NOT_REACHED), (0.0, HOMED_OFF_HOME)):  # a glitch with nothing unconfirmed
        intake = _intake()
        assert intake.check(StateMsg(1, 0.0, state.copy(), int(StateFlags.HOMED), ()), 0.001, 1).accepted
        home = list(spec.home_position_m)
        moves = [(5, [pushed_m, 0.0, 0.0]), (6, [pushed_m, 0.0, 0.0])]  # commanded, never confirmed
        intake.bound.update(home, intake.bound.low, intake.bound.high, moves, None, (0.0, 0.0, 0.0))
        intake.expect_home()
        assert (intake.home_doubt_m >= HOME_DOUBT_M) == (kind == HOME_NOT_REACHED)
        off = state.copy()
        off[CONTRACT.position_slice[0]] += 0.05
        verdict = intake.check(StateMsg(2, 0.04, off, int(StateFlags.HOMED), ()), 0.041, 2)
        assert not verdict.accepted and verdict.kind == kind
    intake = _intake()
    intake.home_doubt_m, intake.last_valid_t = 0.03, 0.0
    assert "stalled" in intake.reject(HOME_NOT_REACHED_REASON, 0.01, watchdog_stop_s=1.0)  # at once


def test_the_worker_answers_twice_asked_and_its_thread_ends_when_closed_idle_busy_or_with_an_untaken_answer():
    worker = PolicyWorker()
    worker.submit(lambda x: x * 2, 3)
    assert worker.wait(1.0) and worker.wait(0.0)  # a second wait still sees the posted answer
    assert worker.take() == (6, None) and not worker.busy
    with pytest.raises(RuntimeError, match="still running"):
        release = threading.Event()
        worker.submit(lambda x: release.wait(), None)
        worker.submit(lambda x: x, 1)
    release.set()
    assert worker.wait(1.0)
    worker.close()  # an answer posted and never taken: the thread still leaves
    worker._thread.join(1.0)
    assert not worker._thread.is_alive()
    idle = PolicyWorker()
    idle.close()
    idle._thread.join(1.0)
    assert not idle._thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        idle.submit(lambda x: x, 1)
    gate = threading.Event()
    busy = PolicyWorker()
    busy.submit(lambda x: gate.wait(), None)
    busy.close()  # closed mid-call: leaves once the call returns
    gate.set()
    busy._thread.join(1.0)
    assert not busy._thread.is_alive()


def test_a_command_sent_after_a_state_was_made_does_not_turn_the_reckoning_around():
    """Campaign seed 6001737: with the states a period late, the line (2, 3) came twice; command 5, sent meanwhile
    (+x -y), entered the reckoning before 2 and 3 (+x +y) had, so the honest state after command 2 lay above the
    reckoned y and was rejected (``beside_commands``); three in a row, then a false ``not_following`` stop."""
    spec = robot_spec()
    intake = _intake()
    pos = slice(*CONTRACT.position_slice)
    home = np.zeros(CONTRACT.state_dim)
    home[pos] = spec.home_position_m

    def at(seq: int, position: np.ndarray, pending: tuple[int, ...], flags: int = 0):
        return intake.check(StateMsg(seq, seq * PERIOD_S, position, flags, pending), seq * PERIOD_S + 0.001, seq)

    assert at(1, home, (0, 0), int(StateFlags.HOMED)).accepted
    for seq, command in ((2, [1.0, 1.0, 0.0, 0.0]), (3, [1.0, 1.0, 0.0, 0.0])):
        intake.line.sent(seq, np.array(command), robot_reports_line=True)
    assert at(4, home, (2, 3)).accepted
    intake.line.sent(5, np.array([1.0, -1.0, 0.0, 0.0]), robot_reports_line=True)
    assert at(6, home, (2, 3)).accepted  # made before command 5 arrived
    moved = home.copy()
    moved[pos] += np.array(spec.actuator_gain) * spec.command_scale_m * np.array([1.0, 1.0, 0.0])  # command 2
    verdict = at(7, moved, (3, 5))
    assert verdict.accepted, verdict.kind

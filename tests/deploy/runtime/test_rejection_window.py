"""A robot that is wrong often, but never ``max_implausible_states`` times in a row, is stopped by the rejection
window (``max_rejected_in_window`` of the last ``rejection_window_states`` states); one wrong now and then is held and
counted, not stopped. The window itself: a ring of verdicts with a running count.

The loop tests run the scripted lock-step robot on the test's clock (``scripted_robot.py``).
"""

from __future__ import annotations

import math

import pytest
from loop_fixtures import CONTRACT, DelayAwareP, robot_spec
from scripted_robot import OUTSIDE_M, POSE, ScriptedClock, ScriptedRobot
from test_escalation import HomesOffHome

from deploy.runtime.goals import GoalSource
from deploy.runtime.loop import Controller, LoopConfig
from deploy.runtime.rejection_window import RejectionWindow
from deploy.runtime.state_intake import REJECTED_TOO_OFTEN
from deploy.runtime.state_machine import LoopState
from deploy.wire import StateMsg

PERIOD_S = 0.01
TICKS = 400


class GlitchingSensorRobot(ScriptedRobot):
    """The scripted robot whose position sensor reads ``OUTSIDE_M`` off on every ``every``-th state."""

    def __init__(self, clock: ScriptedClock, every: int) -> None:
        super().__init__(clock, CONTRACT)
        self.every = every
        self.sent_states = 0

    def _state(self) -> StateMsg:
        msg = super()._state()
        self.sent_states += 1
        if self.sent_states % self.every:
            return msg
        state = msg.state.copy()
        state[0] += OUTSIDE_M
        return StateMsg(msg.seq, msg.t_s, state, msg.flags, msg.pending)


def run_glitching(every: int, config: LoopConfig | None = None):
    clock = ScriptedClock()
    robot = GlitchingSensorRobot(clock, every)
    config = config or LoopConfig(period_s=PERIOD_S, max_episode_steps=30, max_ticks=TICKS, freeze_gc=False)
    goals = GoalSource([robot_spec().home_position_m] * 100)
    controller = Controller(robot, CONTRACT, DelayAwareP(), robot_spec(), goals, config, clock=clock)
    return controller.run()


def test_a_sensor_wrong_on_every_third_state_is_stopped():
    """Before: each bad state was held and counted, the next good one reset the run, and the loop drove on with a
    third of its ticks held for as long as the goals lasted. Now it stops once 10 of the last 50 states were
    rejected, and says why."""
    report = run_glitching(every=3)
    stops = [t for t in report.transitions if t.target is LoopState.SAFE_STOP]
    assert stops, "a robot wrong on a third of its states must be stopped"
    assert report.counts[REJECTED_TOO_OFTEN] >= 1
    assert "10 of the last" in stops[0].reason and "implausible_" in stops[0].reason
    assert "check its sensors" in stops[0].reason


def test_the_same_robot_was_never_stopped_by_the_run_in_a_row_alone():
    """The counterfactual: with the window as large as the run (it never fills), only ``max_implausible_states`` in a
    row could stop this robot, and it never does."""
    config = LoopConfig(
        period_s=PERIOD_S,
        max_episode_steps=30,
        max_ticks=TICKS,
        freeze_gc=False,
        rejection_window_states=TICKS,
        max_rejected_in_window=TICKS,
    )
    report = run_glitching(every=3, config=config)
    assert not [t for t in report.transitions if t.target is LoopState.SAFE_STOP]
    assert sum(v for k, v in report.counts.items() if k.startswith("implausible_")) > TICKS // 4


def test_a_sensor_wrong_now_and_then_is_held_and_counted_not_stopped():
    report = run_glitching(every=12)
    assert not [t for t in report.transitions if t.target is LoopState.SAFE_STOP]
    assert report.counts.get(REJECTED_TOO_OFTEN, 0) == 0
    assert sum(v for k, v in report.counts.items() if k.startswith("implausible_")) >= TICKS // 12 - 2
    assert [e for e in report.episodes if not e.aborted], "the episodes are served, the bad states held"


def test_the_window_counts_only_its_last_states():
    window = RejectionWindow(size=4, max_rejected=2)
    assert not window.record("implausible_glitch")
    assert [window.record() for _ in range(3)] == [False, False, False]
    assert not window.record("implausible_glitch")  # the first reject left the ring with this state
    assert window.rejected == 1
    assert window.record("nan_state")
    assert window.summary() == "2 of the last 4 states were rejected (implausible_glitch: 1, nan_state: 1)"
    window.reset()
    assert window.rejected == 0 and not window.record("nan_state")


def test_the_summary_names_the_most_frequent_reason_first():
    window = RejectionWindow(size=10, max_rejected=10)
    for reason in ("a", "b", "b", "", "b", "a", "c"):
        window.record(reason)
    assert window.summary() == "6 of the last 7 states were rejected (b: 3, a: 2, c: 1)"


@pytest.mark.parametrize(
    ("size", "max_rejected", "says"), [(0, 1, ">= 1"), (50, 0, "first rejected"), (50, 51, "never")]
)
def test_a_window_that_could_never_stop_is_refused(size: int, max_rejected: int, says: str):
    with pytest.raises(ValueError, match="rejection_window_states|max_rejected_in_window") as error:
        LoopConfig(rejection_window_states=size, max_rejected_in_window=max_rejected)
    assert says in str(error.value)


def test_homed_states_off_the_home_are_left_to_the_homing_limit():
    """A robot whose every HOMED state lies 5 cm off its home, answered quickly (HOME resent every tick): its HOMED
    states are rejected often enough to fill the window, but the stop that fires is homing's, which names the home
    and the fix (recalibrate), not the window's."""
    clock = ScriptedClock()
    robot = HomesOffHome(clock, glitches=math.inf)
    config = LoopConfig(
        period_s=PERIOD_S, home_retry_ticks=1, max_home_retries=30, recover=False, max_ticks=300, freeze_gc=False
    )
    controller = Controller(robot, CONTRACT, DelayAwareP(), robot_spec(), GoalSource([POSE]), config, clock=clock)
    report = controller.run()
    assert report.counts["implausible_homed_off_home"] > config.max_rejected_in_window
    assert report.counts.get(REJECTED_TOO_OFTEN, 0) == 0
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert "re-run `robot-grpo calibrate`" in stop.reason

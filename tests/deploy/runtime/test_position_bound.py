"""The position bound that silence cannot shrink (``deploy.runtime.position_bound``): its arithmetic, then the cases
of issue 31 over the real pty (lock-step simulated robot; the truth is ``SimRobot.trace``, one entry per control
step).

Before: the "not following" check compared consecutive states and skipped below 1 cm of expected motion, so a
policy commanding +0.3 units (1 cm per step at the nominal gain) past a position sensor frozen mid-run drove the arm
12.3 cm out of the box, and motors that stopped (positions constant, states still coming) ran the episode to its
end undetected.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from loop_fixtures import DELAY, Push, robot_spec, run_loop
from test_untrusted_states import _freeze_position as freeze_position

from deploy.runtime.goals import GoalSource
from deploy.runtime.loop import Controller, LoopConfig
from deploy.runtime.position_bound import BESIDE_COMMANDS, MOTION_UNCONFIRMED, PositionBound
from deploy.runtime.state_check import NOT_FOLLOWING
from deploy.runtime.state_machine import LoopState
from envs.sim_robot import SimRobot

PERIOD_S = 0.01
OUTSIDE_TOL_M = 1e-3
GAIN_MAX = 0.75
STEP = 0.01  # metres at command scale: a command of 0.2 units x 0.05 m


def bound() -> PositionBound:
    return PositionBound(dims=3, gain_max=GAIN_MAX, noise_m=0.0, unknown_move_m=0.05, max_unconfirmed_m=0.1)


def test_an_unconfirmed_state_never_shrinks_the_bound_and_the_reckoning_grows_with_the_commands():
    b = bound()
    home = [1.0, 0.5, 0.5]
    b.anchor(home, tuple(home), tuple(home))
    # two commands of +1 cm in y applied; the sensor says the arm did not move (frozen): the state's own bound is the
    # frozen reading, the reckoning reaches 0.75 x 2 cm = 1.5 cm further, plus 10% coupling of the farthest 2 cm x 0.75
    kind = b.update(home, tuple(home), tuple(home), [(1, [0.0, STEP, 0.0]), (2, [0.0, STEP, 0.0])], None, ())
    assert kind == "" and not b.confirmed
    coupling = 0.1 * GAIN_MAX * 2 * STEP
    assert b.high[1] == pytest.approx(0.5 + GAIN_MAX * 2 * STEP + coupling)
    assert b.low[1] == pytest.approx(0.5 - coupling) and b.high[0] == pytest.approx(1.0 + coupling)
    # the same command numbers again (still listed as possibly applied) are not counted twice
    b.update(home, tuple(home), tuple(home), [(2, [0.0, STEP, 0.0])], None, ())
    assert b.high[1] == pytest.approx(0.5 + GAIN_MAX * 2 * STEP + coupling)


def test_small_commands_summed_over_states_catch_a_frozen_sensor():
    """0.6 cm of certain move per state (under the old 1 cm dead band): the second state has 1.2 cm summed and the
    frozen reading falls short of 1% of it."""
    b = bound()
    home = [1.0, 0.5, 0.5]
    b.anchor(home, tuple(home), tuple(home))
    move = [0.0, 0.006, 0.0]
    assert b.update(home, tuple(home), tuple(home), [(1, move)], [move], ()) == ""
    assert b.update(home, tuple(home), tuple(home), [(2, move)], [move], ()) == NOT_FOLLOWING


def test_a_long_move_the_arm_barely_followed_is_not_following():
    """4 mm moved before the sensor froze passes the 1% rule for any move under 40 cm; over a long window the arm must
    go a quarter of the move beyond the newest two moves (lag): at 4 moves 0.25 x (4 - 2) cm = 5 mm > 4 mm."""
    b = bound()
    home = [1.0, 0.5, 0.5]
    b.anchor(home, tuple(home), tuple(home))
    frozen = [1.0, 0.504, 0.5]
    kinds = []
    for n in range(6):
        move = [0.0, STEP, 0.0]
        kinds.append(b.update(frozen, tuple(frozen), tuple(frozen), [(n, move)], [move], ()))
    assert kinds[:3] == ["", "", ""] and kinds[3] == NOT_FOLLOWING  # at 3 moves: 0.25 x 1 cm = 2.5 mm < 4 mm


def test_a_state_that_follows_confirms_and_takes_its_own_bound():
    b = bound()
    home = [1.0, 0.5, 0.5]
    b.anchor(home, tuple(home), tuple(home))
    moved = [1.0, 0.518, 0.5]  # 1.8 cm of a 2 cm certain move: 90% >= CONFIRM_SHARE and >= AXIS_CONFIRM_SHARE
    own = ((0.99, 0.508, 0.49), (1.01, 0.528, 0.51))
    move = [0.0, STEP, 0.0]
    assert b.update(moved, *own, [(1, move), (2, move)], [move, move], (0.0, 0.018, 0.0)) == ""
    assert b.confirmed and (b.low, b.high) == own and b.span_m == 0.0


def test_a_reading_short_of_the_axis_share_keeps_that_axis_reckoned():
    """75% of the move confirms the motion as a whole (>= CONFIRM_SHARE) but not the y axis (< AXIS_CONFIRM_SHARE): a
    sensor that shows three quarters of every move would otherwise lead the barrier a quarter short of the arm."""
    b = bound()
    home = [1.0, 0.5, 0.5]
    b.anchor(home, tuple(home), tuple(home))
    moved = [1.0, 0.515, 0.5]
    own = ((0.99, 0.505, 0.49), (1.01, 0.525, 0.51))
    move = [0.0, STEP, 0.0]
    assert b.update(moved, *own, [(1, move), (2, move)], [move, move], (0.0, 0.015, 0.0)) == ""
    assert b.confirmed
    coupling = 0.1 * GAIN_MAX * 2 * STEP
    assert b.low[1] == pytest.approx(0.5 - coupling) and b.high[1] == own[1][1]  # the reckoning and the reading
    assert (b.low[0], b.high[0]) == (0.99, 1.01)  # x and z stayed put: they confirm and take the state's own bound


def test_a_sensor_offset_on_a_quiet_axis_does_not_move_its_bound():
    """The motion confirms along y while z reads 8 mm higher than it was (a sensor offset; campaign seed 310170 had
    4.8 cm in z while a wide reckoning let the reading through): the z bound keeps where the commands can have taken
    the arm, together with the reading. An offset past the motion margin is a reading beside the commands."""
    b = bound()
    home = [1.0, 0.5, 0.5]
    b.anchor(home, tuple(home), tuple(home))
    moved = [1.0, 0.52, 0.508]
    own = ((0.999, 0.519, 0.507), (1.001, 0.521, 0.509))
    move = [0.0, STEP, 0.0]
    assert b.update(moved, *own, [(1, move), (2, move)], [move, move], (0.0, 0.02, 0.0)) == ""
    assert b.confirmed  # along the motion as a whole
    assert b.low[2] < 0.5 and b.high[2] == 0.509 and (b.low[1], b.high[1]) == (0.519, 0.521)
    far = [1.0, 0.54, 0.548]  # 4.8 cm up with no command in z
    assert b.update(far, *((0.999, 0.539, 0.547), (1.001, 0.541, 0.549)), [(3, move), (4, move)], [move, move], ()) == (
        BESIDE_COMMANDS
    )


def test_commands_that_reverse_each_other_end_unconfirmed_once_the_reckoning_spans_the_allowance():
    b = bound()
    home = [1.0, 0.5, 0.5]
    b.anchor(home, tuple(home), tuple(home))
    kinds = []
    for n in range(40):  # +5 cm, -4.5 cm, ...: the partial sums climb 0.5 cm a pair, past 10 cm / 0.75 = 13.3 cm
        move = [0.0, 0.05 if n % 2 == 0 else -0.045, 0.0]
        kinds.append(b.update(home, tuple(home), tuple(home), [(n, move)], None, ()))
    assert MOTION_UNCONFIRMED in kinds


# Over the real pty ---------------------------------------------------------------------------------------------------
SPEC = robot_spec(hold_s=0.025, stop_s=0.1)
HOME = np.array(SPEC.home_position_m)
FACE_GAP_M = 0.12  # the +y face this far from the home pose
BOX = ((1.05, 0.40, 0.42), (1.65, HOME[1] + FACE_GAP_M, 0.95))
TOWARD_PLUS_Y = (0.0, 0.3, 0.0, 0.0)  # 1 cm per step at the nominal gain: under the old per-state dead band
Y = 1


def stall_motors(robot: SimRobot) -> None:
    """The motors stop: commands still leave the robot's line, the arm stays where it is, the sensor is honest."""
    robot.env.action_gain = 0.0


def _run_with_fault(policy, fault, box=BOX, goal=None, steps_into_episode: int = 1):
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    began: list[tuple[int, int]] = []  # (tick, robot steps so far) when the fault began

    def inject(controller: Controller, record) -> None:
        if controller.sm.state is LoopState.RUN and controller.episodes.steps == steps_into_episode and not began:
            fault(robot)
            began.append((controller.tick, len(robot.trace)))

    spec = robot_spec(box=box, hold_s=0.025, stop_s=0.1)
    goal = goal if goal is not None else (HOME[0], box[1][1] - 0.01, HOME[2])
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=50, hold_ticks=3, max_ticks=150, recover=False)
    run = run_loop(policy, GoalSource([goal]), config, spec, robot, inject)
    return run, robot, began


def _outside_steps(robot: SimRobot, box) -> int:
    trace = np.array(robot.trace)
    return int(np.sum(np.maximum(np.array(box[0]) - trace, trace - np.array(box[1])).max(axis=1) > OUTSIDE_TOL_M))


@pytest.mark.parametrize("fault", [freeze_position, stall_motors], ids=["frozen_sensor", "stalled_motors"])
def test_small_constant_commands_past_a_silent_fault_stop_inside_the_box(fault):
    """+0.3 units in y from the first step after the HOME, 12 cm from the +y face: before, a frozen sensor let the
    arm drive through the face. Now: stopped with a named reason, 0 steps more than 1 mm outside, and within 1 s of
    robot time (25 control steps of the spec's 40 ms) of the fault."""
    run, robot, began = _run_with_fault(Push(TOWARD_PLUS_Y), fault)
    stops = [t for t in run.report.transitions if t.target is LoopState.SAFE_STOP]
    assert began and stops, [t.reason for t in run.report.transitions]
    assert "implausible_not_following" in stops[0].reason or "implausible_motion_unconfirmed" in stops[0].reason
    assert _outside_steps(robot, BOX) == 0
    assert stops[0].tick - began[0][0] <= 1.0 / SPEC.control_period_s


def test_the_shipped_policy_past_a_frozen_sensor_stops_inside_the_box():
    """The shipped default policy (commands 0.17-0.24 units) toward a goal 1 cm inside the +y face, the sensor
    frozen two steps into the episode: before, it drove 0.18-0.21 m past the frozen reading undetected."""
    from deploy.runtime.package import load_package

    package = load_package(Path(__file__).resolve().parents[3] / "models" / "default")
    backend = package.make_backend("ort-cpu", "fp32")
    run, robot, began = _run_with_fault(backend, freeze_position, steps_into_episode=2)
    stops = [t for t in run.report.transitions if t.target is LoopState.SAFE_STOP]
    assert began and stops and "implausible_" in stops[0].reason, [t.reason for t in run.report.transitions]
    assert _outside_steps(robot, BOX) == 0
    trace = np.array(robot.trace)
    # measured: 3.2 cm (9 steps of 3.6 mm: the 4 mm moved before the freeze, 2 of lag, 2 in the line); before: 18-21 cm
    assert trace[began[0][1] :, Y].max() - trace[began[0][1], Y] <= 0.04


def test_an_honest_arm_pushing_small_commands_at_a_face_is_not_stopped():
    """The negative control: the same +0.3 y push with no fault is held at the face by the barrier, never stopped."""
    run, robot, _ = _run_with_fault(Push(TOWARD_PLUS_Y), lambda robot: None)
    assert not [t for t in run.report.transitions if t.target is LoopState.SAFE_STOP]
    assert _outside_steps(robot, BOX) == 0
    assert run.report.episodes and not run.report.episodes[0].aborted

"""CRC-valid lies from the robot, under a policy that pushes toward a workspace face (lock-step, over a real pty).

The simulated robot's own fault options rewrite what it sends (the physics is untouched, so ``robot.trace`` is the
truth): a position shifted a few centimetres, x = 1e30 m, a stamp far in the future, a sequence jump, a controller
that reboots (its clock and sequence start over), malformed vector lengths. For each:

1. the true gripper position is never more than 1 mm outside the workspace box (any tick);
2. the run continues or recovers: every episode is served;
3. the reasons are counted in the tick log (and the run report's counters).

A glitch too small to be told from real motion (8 mm, inside the check's margin) is not detected; the barrier's
position bounds keep it harmless, which case ``shift_8mm`` shows.

Timing: the loop period is 10 ms; watchdog hold 25 ms, stop 100 ms (as in test_faults.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from loop_fixtures import CONTRACT, DELAY, DelayAwareP, Push, robot_spec, run_loop, seeded_goals
from scripted_robot import ScriptedClock, ScriptedRobot

from deploy.runtime.goals import GoalSource
from deploy.runtime.loop import Controller, LoopConfig
from deploy.runtime.state_machine import LoopState
from deploy.runtime.ticklog import TickLogWriter, read_ticklog
from envs.sim_robot import TRACE_LEN, SimRobot

PERIOD_S = 0.01
# The barrier plans at the spec's gain bound itself (no margin for a motor faster than its spec): these lies arrive
# while the arm presses on the face (START); with a margin the arm is still braking toward it then, and a reading
# shifted against the motion reads as not following (a stop at once) rather than as a held, unexplained jump.
SPEC = replace(robot_spec(hold_s=0.025, stop_s=0.1), barrier_gain_margin=1.0)
LOW, HIGH = np.array(SPEC.workspace_low), np.array(SPEC.workspace_high)
OUTSIDE_TOL_M = 1e-3
EPISODE_STEPS = 25
N_GOALS = 6
START = 18  # ticks into the run; the arm is pressing on the face by then
REPEAT_EVERY = 15  # ticks between repeated injections
Y = 1  # the axis pushed on: full speed toward the y = 0.40 m face
TOWARD_MINUS_Y = (0.0, -1.0, 0.0, 0.0)


def shift_y(metres: float) -> Callable[[np.ndarray], np.ndarray]:
    """Report the gripper ``metres`` further from the -y face than it is (the barrier would allow more)."""

    def glitch(state: np.ndarray) -> np.ndarray:
        out = state.copy()
        out[Y] += metres
        return out

    return glitch


def set_x(value: float) -> Callable[[np.ndarray], np.ndarray]:
    def glitch(state: np.ndarray) -> np.ndarray:
        out = state.copy()
        out[0] = value
        return out

    return glitch


@dataclass(frozen=True)
class Lie:
    name: str
    inject: Callable[[SimRobot], None]
    times: int  # injections, REPEAT_EVERY ticks apart
    expected: tuple[str, ...]  # reasons that must appear in the tick log ("" for none)


def set_value(index: int, value: float) -> Callable[[np.ndarray], np.ndarray]:
    def glitch(state: np.ndarray) -> np.ndarray:
        out = state.copy()
        out[index] = value
        return out

    return glitch


GRIP_VELP_X, GRIP_VELP_Y, FINGER = 5, 6, 3  # fetch_reach state indices (velocity in m/step, finger joint in m)


def _glitch(fn: Callable[[np.ndarray], np.ndarray], frames: int) -> Callable[[SimRobot], None]:
    def inject(robot: SimRobot) -> None:
        robot.faults.state_glitch = fn
        robot.faults.glitch_frames = frames

    return inject


def _stamp(offset_s: float) -> Callable[[SimRobot], None]:
    def inject(robot: SimRobot) -> None:
        robot.faults.stamp_offset_s = offset_s
        robot.faults.stamp_frames = 1

    return inject


def _seq_jump(robot: SimRobot) -> None:
    robot.faults.seq_jump = 520


def _pending_length(robot: SimRobot) -> None:
    robot.faults.pending_length = 1


LIES = [
    Lie("shift_3cm", _glitch(shift_y(0.03), 1), 5, ("implausible_state", "implausible_unexplained_motion")),
    Lie("shift_3cm_three_frames", _glitch(shift_y(0.03), 3), 2, ("implausible_unexplained_motion",)),
    Lie("shift_8mm", _glitch(shift_y(0.008), 1), 5, ()),
    Lie("x_1e30", _glitch(set_x(1e30), 1), 3, ("implausible_outside_envelope",)),
    Lie("velocity_1e30", _glitch(set_value(GRIP_VELP_X, 1e30), 1), 3, ("implausible_field_out_of_range",)),
    # 0.3 m per control step (7.5 m/s): inside the bound of 10x the plausible speed it had, 2.7x the one it has
    Lie("velocity_0.3", _glitch(set_value(GRIP_VELP_X, 0.3), 1), 3, ("implausible_field_out_of_range",)),
    Lie("finger_minus_7m", _glitch(set_value(FINGER, -7.0), 1), 3, ("implausible_field_out_of_range",)),
    # 0.5 m: inside the envelope's diagonal (the bound it had), ten times the finger's range in the spec
    Lie("finger_0.5m", _glitch(set_value(FINGER, 0.5), 1), 3, ("implausible_field_out_of_range",)),
    Lie("velocity_1e300", _glitch(set_value(GRIP_VELP_Y, 1e300), 1), 3, ("nan_state",)),  # inf as float32
    Lie("future_stamp", _stamp(5.0), 3, ("implausible_time_ahead",)),
    Lie("past_stamp", _stamp(-5.0), 3, ("implausible_time_backwards",)),
    Lie("sequence_jump", _seq_jump, 2, ("implausible_seq_gap", "robot_restart")),
    Lie("robot_restart", lambda r: r.restart(), 2, ("robot_restart",)),
    Lie("state_of_9_values", _glitch(lambda s: s[:9], 2), 2, ("malformed_state", "malformed_state_length")),
    Lie("pending_of_1", _pending_length, 1, ("malformed_state", "malformed_pending_length")),
]


class Injector:
    """on_tick hook: injects the lie ``times`` times, the first at the first RUN tick >= START; a pending-length lie
    is switched off again 3 ticks later."""

    def __init__(self, robot: SimRobot, lie: Lie) -> None:
        self.robot, self.lie = robot, lie
        self.ticks: list[int] = []

    def __call__(self, controller: Controller, record) -> None:
        tick = controller.tick
        if self.robot.faults.pending_length is not None and self.ticks and tick >= self.ticks[-1] + 3:
            self.robot.faults.pending_length = None
        due = not self.ticks or tick >= self.ticks[-1] + REPEAT_EVERY
        if len(self.ticks) < self.lie.times and due and tick >= START and controller.sm.state is LoopState.RUN:
            self.lie.inject(self.robot)
            self.ticks.append(tick)


def _run(lie: Lie, tmp_path: Path):
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    injector = Injector(robot, lie)
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, hold_ticks=3, max_ticks=1200)
    log = TickLogWriter(tmp_path / "ticks.mcap")
    try:
        run = run_loop(
            Push(TOWARD_MINUS_Y), seeded_goals(list(range(N_GOALS))), config, SPEC, robot, injector, ticklog=log
        )
    finally:
        log.close()
    return run, injector, read_ticklog(tmp_path / "ticks.mcap")


@pytest.mark.parametrize("lie", LIES, ids=[lie.name for lie in LIES])
def test_a_lying_robot_never_takes_the_arm_out_of_the_box(lie: Lie, tmp_path: Path):
    run, injector, logged = _run(lie, tmp_path)
    report, robot = run.report, run.robot
    assert len(injector.ticks) == lie.times, "the lie was not injected as often as planned"

    # 1. the true gripper position (the physics, not what the robot reported) stayed inside the box
    trace = np.array(robot.trace)
    assert len(trace) > 100
    outside = np.maximum(LOW - trace, trace - HIGH).max(axis=1)
    assert np.all(outside <= OUTSIDE_TOL_M), f"{int(np.sum(outside > OUTSIDE_TOL_M))} steps more than 1 mm outside"
    assert "workspace_barrier" in report.interventions  # the pushing policy really met the barrier

    # 2. the run continued or recovered: every episode was served, the last ones whole
    assert len(report.episodes) == N_GOALS
    aborted = sum(e.aborted for e in report.episodes)  # the end names the aborted ones, not "all goals served"
    served = "all goals served" if not aborted else f"all goals taken: {N_GOALS - aborted} served, {aborted} aborted"
    assert report.transitions[-1].reason.startswith(served)
    assert any(not e.aborted and e.steps == EPISODE_STEPS for e in report.episodes[-2:])

    # 3. the reasons are in the tick log (and counted in the run report)
    reasons = {reason for record in logged for reason in record.reasons}
    for expected in lie.expected:
        assert expected in reasons, f"{expected!r} missing from the tick log: {sorted(reasons)}"
        assert report.interventions.get(expected, 0) >= 1
    held = [
        r for r in logged if set(r.reasons) & {"implausible_state", "malformed_state", "robot_restart", "nan_state"}
    ]
    assert all(np.all(r.sent == 0.0) for r in held), "a state that failed its check was used to move the arm"
    given = [r.obs_flat for r in logged if r.obs_flat.size]  # what the policy got (float32)
    assert given and all(np.all(np.abs(obs) < 1e3) for obs in given), "an implausible value reached the policy"


def test_a_robot_restart_costs_a_hold_and_a_re_home(tmp_path: Path):
    run, injector, _ = _run(next(lie for lie in LIES if lie.name == "robot_restart"), tmp_path)
    report = run.report
    assert run.robot.counts["restarts"] == 2
    assert report.counts["robot_restarts"] == 2
    assert report.counts.get("safe_stops", 0) == 0  # a restart is not a fault of ours: hold and re-home only
    holds = [t for t in report.transitions if t.target is LoopState.HOLD and "restarted" in t.reason]
    assert len(holds) == 2
    for hold in holds:  # within a few ticks of the reboot (the confirmation takes resync_states states)
        assert any(0 <= hold.tick - tick <= LoopConfig().resync_states + 2 for tick in injector.ticks)


def test_implausible_states_in_a_row_end_in_a_safe_stop(tmp_path: Path):
    """A position that keeps lying (an offset that stays) is held, then stopped; after the stop the robot is
    re-homed and the run goes on."""
    frames = LoopConfig().max_implausible_states  # an offset that stays until the stop
    lie = Lie("persistent_offset", _glitch(shift_y(0.05), frames), 1, ("implausible_unexplained_motion",))
    run, injector, logged = _run(lie, tmp_path)
    stops = [t for t in run.report.transitions if t.target is LoopState.SAFE_STOP]
    assert len(stops) == 1 and "implausible" in stops[0].reason
    assert stops[0].tick - injector.ticks[0] <= LoopConfig().max_implausible_states + 1
    assert len(run.report.episodes) == N_GOALS
    assert sum(1 for r in logged if "implausible_state" in r.reasons) == LoopConfig().max_implausible_states


def test_a_homed_state_read_together_with_newer_ones_still_starts_the_episode(tmp_path: Path):
    """A HOMED state that reaches the loop in one read with newer states is answered first (it is the episode's
    anchor); the newest state after it waits for the next tick and is checked against it, so the jump home is
    expected and the episode starts (no implausible states, no safe stop)."""
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    robot.faults.states_after_home = 2
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, hold_ticks=3, max_ticks=1200)
    run = run_loop(Push(TOWARD_MINUS_Y), seeded_goals(list(range(N_GOALS))), config, SPEC, robot)
    report = run.report
    assert report.counts["skipped_states"] >= N_GOALS  # the states after HOMED really arrived together
    assert not [k for k in report.counts if k.startswith("implausible_")], report.counts
    assert report.counts.get("safe_stops", 0) == 0
    assert report.counts.get("home_retries", 0) == 0
    assert len(report.episodes) == N_GOALS and all(not e.aborted for e in report.episodes)


def test_a_lost_homed_state_costs_a_home_retry_not_a_safe_stop(tmp_path: Path):
    """The HOMED state of episode 1 is lost on the link: the states after it show the arm back at the home pose
    without the flag. That jump is the robot's own homing, not an unexplained motion: no implausible state, no safe
    stop; the loop resends HOME and every episode is served."""
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    lost = []

    def lose_the_next_homed_state(controller: Controller, record) -> None:
        if not lost and controller.sm.state is LoopState.RUN and controller.episodes.steps >= EPISODE_STEPS // 2:
            robot.faults.lose_homed_states = 1  # the arm is far from home by now: the jump home is large
            lost.append(controller.tick)

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, hold_ticks=3, max_ticks=1200)
    run = run_loop(
        Push(TOWARD_MINUS_Y), seeded_goals(list(range(N_GOALS))), config, SPEC, robot, lose_the_next_homed_state
    )
    report = run.report
    assert lost and robot.faults.lose_homed_states == 0  # the HOMED state really was lost
    assert not [k for k in report.counts if k.startswith("implausible_")], report.counts
    assert report.counts.get("safe_stops", 0) == 0
    assert report.counts.get("home_retries", 0) >= 1
    assert len(report.episodes) == N_GOALS and all(not e.aborted for e in report.episodes)


class Recording:
    """The P policy, keeping every observation it is given."""

    def __init__(self) -> None:
        self.inner = DelayAwareP()
        self.given: list[np.ndarray] = []

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.given.append(np.array(obs))
        return self.inner(obs)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # the contract's cast, as meant
def test_a_goal_beyond_float32_never_reaches_the_policy_as_inf():
    """Finiteness is checked on what the policy gets, after the float32 cast: a goal of 1e300 m is finite as float64
    but inf as float32. GoalSource refuses one (test_goals.py); the loop does not rely on that (here the goal is
    changed after the source's checks). The policy is never called with it; the loop stops safely and aborts the
    episode."""
    policy = Recording()
    goals = GoalSource([[1.3, 0.75, 0.6]])
    goals.goals[0, 0] = 1e300  # past the source's checks: finite as float64
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, recover=False, max_ticks=100)
    run = run_loop(policy, goals, config, SPEC)
    assert all(np.all(np.isfinite(obs)) for obs in policy.given)
    assert run.report.counts["non_finite_observations"] == 1
    stop = next(t for t in run.report.transitions if t.target is LoopState.SAFE_STOP)
    assert "not finite as float32" in stop.reason
    assert [e.aborted for e in run.report.episodes] == [True]


RENUMBERED = 1_000_000  # a robot numbering bug: every command it reports in its delay line is this much off


def test_a_delay_line_naming_commands_never_sent_is_implausible_and_never_planned_with():
    """Mid-episode the robot starts reporting its delay line with numbers the loop never sent (CRC-valid frames,
    true positions). Before, the loop planned with an all-hold history for the rest of the run and moved
    ``acked_seq`` to numbers never sent (the barrier then forgot the commands really in flight). Now each such state
    is implausible: held, counted, never given to the policy; ``max_implausible_states`` in a row stop the loop.
    Scripted robot, the test's clock."""
    clock = ScriptedClock()
    robot = ScriptedRobot(clock, CONTRACT)
    robot.follows_commands = True  # the goal is 8 cm away: the arm moves as its line shows the commands applied
    lied_at: list[int] = []

    def renumber_in_run(controller: Controller, record) -> None:
        if not lied_at and controller.sm.state is LoopState.RUN and controller.episodes.steps >= 3:
            robot.pending_offset = RENUMBERED
            lied_at.append(controller.tick)

    records = []

    def hook(controller: Controller, record) -> None:
        if record is not None:
            records.append(record)
        renumber_in_run(controller, record)

    config = LoopConfig(period_s=PERIOD_S, hold_ticks=3, recover=False, max_ticks=200, freeze_gc=False)
    goals = GoalSource([[1.3, 0.75, 0.6]])
    controller = Controller(robot, CONTRACT, DelayAwareP(), SPEC, goals, config, on_tick=hook, clock=clock)
    report = controller.run()
    assert lied_at
    limit = config.max_implausible_states
    stop = next(t for t in report.transitions if t.target is LoopState.SAFE_STOP)
    assert stop.source is LoopState.RUN and "implausible_unsent_pending" in stop.reason, stop.reason
    assert stop.tick - lied_at[0] <= limit + 1
    assert report.counts["implausible_unsent_pending"] == limit
    assert report.interventions["implausible_unsent_pending"] == limit
    held = [r for r in records if "implausible_unsent_pending" in r.reasons]
    assert len(held) == limit and all(np.all(r.sent == 0.0) and not r.obs_flat.size for r in held)
    # the policy never saw them (the state read in the tick of the lie, before it, is planned with at the next)
    assert not [r for r in records if r.tick > lied_at[0] + 1 and r.obs_flat.size]
    assert controller.line.acked_seq in robot.commands  # never a number that was not sent
    assert report.counts.get("unknown_pending", 0) == 0


class EveryThirdState:
    """on_tick hook: from the first RUN tick >= START on, the robot's position sensor reads 3 cm off on every third
    state (an intermittent glitch: never two bad states in a row)."""

    def __init__(self, robot: SimRobot) -> None:
        self.robot = robot
        self.started: int | None = None

    def __call__(self, controller: Controller, record) -> None:
        if self.started is None and controller.tick >= START and controller.sm.state is LoopState.RUN:
            self.started = controller.tick
        if self.started is not None and (controller.tick - self.started) % 3 == 0:
            self.robot.faults.state_glitch = shift_y(0.03)
            self.robot.faults.glitch_frames = 1


def test_a_sensor_that_glitches_every_third_state_is_stopped_not_driven_on(tmp_path: Path):
    """Before: never two bad states in a row, so every one was held and counted and the arm was driven on for as
    long as the goals lasted with a third of its states wrong. Now ``max_rejected_in_window`` of the last
    ``rejection_window_states`` stop it, within the window of the glitch starting, with the arm inside the box."""
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    glitch = EveryThirdState(robot)
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, hold_ticks=3, max_ticks=400)
    run = run_loop(Push(TOWARD_MINUS_Y), seeded_goals(list(range(N_GOALS))), config, SPEC, robot, glitch)
    report = run.report
    stops = [t for t in report.transitions if t.target is LoopState.SAFE_STOP]
    assert stops and "states were rejected" in stops[0].reason, [t.reason for t in stops]
    assert glitch.started is not None and stops[0].tick - glitch.started <= config.rejection_window_states
    assert report.counts["rejected_too_often"] >= 1
    trace = np.array(robot.trace)
    assert np.all(np.maximum(LOW - trace, trace - HIGH).max(axis=1) <= OUTSIDE_TOL_M)


def test_a_robot_that_homes_by_itself_mid_episode_aborts_the_episode_and_is_re_homed(tmp_path: Path):
    """The robot homes on its own 12 steps into episode 1 (a protective stop that returns the arm home): its state
    says HOMED though no HOME of the episode awaits an answer. Before: the jump home was checked as motion, 5 'too
    fast' states in a row safe-stopped the robot and nothing named what had happened. Now the episode is aborted,
    the loop holds and re-homes, no safe stop, the other episodes are served whole."""
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    homed_at: list[int] = []

    def home_by_itself(controller: Controller, record) -> None:
        episode = controller.episodes.current
        in_episode_1 = controller.sm.state is LoopState.RUN and episode is not None and episode.index == 1
        if in_episode_1 and controller.episodes.steps == 12 and not homed_at:
            robot.home_unprompted()
            homed_at.append(controller.tick)

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, hold_ticks=3, max_ticks=600)
    log = TickLogWriter(tmp_path / "ticks.mcap")
    try:
        run = run_loop(Push(TOWARD_MINUS_Y), seeded_goals(list(range(4))), config, SPEC, robot, home_by_itself, log)
    finally:
        log.close()
    report = run.report
    assert robot.counts["unprompted_homes"] == 1
    assert report.counts["unrequested_homes"] == 1
    assert report.counts.get("safe_stops", 0) == 0
    assert not [k for k in report.counts if k.startswith("implausible_")], report.counts
    assert [e.aborted for e in report.episodes] == [False, True, False, False]
    assert [e.steps for e in report.episodes if not e.aborted] == [EPISODE_STEPS] * 3
    hold = next(t for t in report.transitions if "homed by itself" in t.reason)
    assert hold.target is LoopState.HOLD and 0 < hold.tick - homed_at[0] <= DELAY + 2
    assert any("unrequested_home" in r.reasons for r in read_ticklog(tmp_path / "ticks.mcap"))


def _freeze_position(robot: SimRobot) -> None:
    """The position sensor freezes at its next reading (the values after it repeat it; velocities read 0)."""
    frozen: list[np.ndarray] = []

    def glitch(state: np.ndarray) -> np.ndarray:
        out = state.copy()
        if not frozen:
            frozen.append(state[:3].copy())
        out[:3] = frozen[0]
        out[GRIP_VELP_X : GRIP_VELP_X + 3] = 0.0
        return out

    robot.faults.state_glitch = glitch
    robot.faults.glitch_frames = 10**6


def _block_arm(robot: SimRobot) -> None:
    """The arm stops moving (it met an obstacle): commands still leave the line, the sensor reads the truth."""
    robot.env.action_gain = 0.0


@pytest.mark.parametrize("reports_line", [True, False], ids=["line", "no_line"])
@pytest.mark.parametrize("fault", [_freeze_position, _block_arm], ids=["frozen_sensor", "blocked_arm"])
def test_an_arm_that_stops_following_its_commands_is_stopped_at_once(
    fault: Callable[[SimRobot], None], reports_line: bool
):
    """Two steps into episode 1, pushing at full speed toward the -y face 32 cm away, the position sensor freezes
    (fresh sequence numbers and stamps, CRC-valid) or the arm is blocked. Before: every frozen state passed every
    check (no motion is always explained), the barrier planned from the frozen position and the arm drove blind
    0.38 m out of the workspace box. Now the first state that shows a command applied without motion is
    ``implausible_not_following`` and the loop safe-stops at once (its e-stop drops the commands in flight): the
    arm goes at most two full steps past its last true reading and never leaves the box. A robot that reports no
    delay line (m = 0) is judged from the commands sent and the spec's delay, over several states: at most five
    steps (before: 0.72 m blind, 0.40 m out of the box)."""
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    if not reports_line:
        robot.faults.pending_length = 0
    steps_late = 2 if reports_line else 5
    began: list[tuple[int, int]] = []  # (tick, robot steps so far) when the fault began

    def inject(controller: Controller, record) -> None:
        episode = controller.episodes.current
        in_episode_1 = controller.sm.state is LoopState.RUN and episode is not None and episode.index == 1
        if in_episode_1 and controller.episodes.steps == 2 and not began:
            fault(robot)
            began.append((controller.tick, len(robot.trace)))

    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, hold_ticks=3, max_ticks=120)
    run = run_loop(Push(TOWARD_MINUS_Y), seeded_goals(list(range(2))), config, SPEC, robot, inject)
    report = run.report
    stops = [t for t in report.transitions if t.target is LoopState.SAFE_STOP]
    assert began and stops and "implausible_not_following" in stops[0].reason, [t.reason for t in stops]
    assert report.counts["implausible_not_following"] >= 1
    tick, steps = began[0]
    assert stops[0].tick - tick <= steps_late + 2
    trace = np.array(robot.trace)
    assert len(trace) < TRACE_LEN  # the trace holds every step of the run
    # the first state after the fault is the last true one (the frozen reading); the arm only moves toward -y
    blind_m = trace[steps, Y] - trace[steps:, Y].min()
    assert blind_m <= steps_late * SPEC.command_scale_m * SPEC.actuator_gain_max + OUTSIDE_TOL_M, blind_m
    assert np.all(np.maximum(LOW - trace, trace - HIGH).max(axis=1) <= OUTSIDE_TOL_M)
    assert report.episodes[0].steps == EPISODE_STEPS and not report.episodes[0].aborted


@pytest.mark.parametrize("max_resets", [3, 4])
def test_a_robot_that_keeps_rebooting_ends_the_run(max_resets: int):
    """The robot reboots 5 steps into each of its first 4 episodes (a brown-out). Before: each reboot cost a hold
    and a re-home, for as long as the goals lasted. Now the reset past ``max_robot_resets`` within
    ``robot_reset_window_s`` safe-stops the robot and ends the run, naming the resets; with one more allowed, the
    run serves every goal after them."""
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    rebooted: set[int] = set()

    def reboot_in_episodes_0_to_3(controller: Controller, record) -> None:
        episode = controller.episodes.current
        in_run = controller.sm.state is LoopState.RUN and episode is not None and controller.episodes.steps == 5
        if in_run and episode.index < 4 and episode.index not in rebooted:
            rebooted.add(episode.index)
            robot.restart()

    config = LoopConfig(
        period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, hold_ticks=3, max_ticks=1200, max_robot_resets=max_resets
    )
    run = run_loop(DelayAwareP(), seeded_goals(list(range(6))), config, SPEC, robot, reboot_in_episodes_0_to_3)
    report = run.report
    end = report.transitions[-1]
    assert report.counts["robot_restarts"] == 4 and robot.counts["restarts"] == 4
    if max_resets == 3:
        assert end.target is LoopState.DONE and "reset itself 4 times within 60 s (robot_restart: 4" in end.reason
        assert report.counts["robot_reset_storms"] == 1
        assert [e.aborted for e in report.episodes] == [True] * 4  # goals 4 and 5 were never started
    else:
        assert end.reason.startswith("all goals taken: 2 served, 4 aborted"), end.reason
        assert report.counts.get("robot_reset_storms", 0) == 0


def test_a_robot_without_a_delay_line_is_named_as_checked_coarsely(caplog: pytest.LogCaptureFixture):
    """A robot that reports no delay line says nothing of which commands it applied, so following is only reckoned
    from the spec's delay, and a frozen sensor is caught later than on a robot with a line. The run says so once,
    in the log and the counts, and serves its goals (an honest arm, no false stop)."""
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=1, control_period_s=PERIOD_S)
    robot.faults.pending_length = 0  # m = 0: "I cannot report my line"
    config = LoopConfig(period_s=PERIOD_S, max_episode_steps=EPISODE_STEPS, hold_ticks=3, max_ticks=120)
    with caplog.at_level("WARNING", logger="deploy.runtime.loop_rejections"):
        goals = GoalSource([(1.30, 0.80, 0.55), (1.40, 0.70, 0.50)])  # above the table (the gripper stops at 0.42 m)
        run = run_loop(DelayAwareP(), goals, config, SPEC, robot)
    assert run.report.counts["no_delay_line"] == 1
    assert sum("reports no delay line" in r.getMessage() for r in caplog.records) == 1
    assert run.report.counts.get("safe_stops", 0) == 0
    assert [e.aborted for e in run.report.episodes] == [False, False]

"""The fault models of the simulated robot (envs.faults), each over a real pty against a lock-step robot: what the
runtime sees goes wrong, the physics (``SimRobot.trace``) stays true; the schedule begins and ends faults at their
robot ticks; ``halt``/``rewind`` make the robot as new for the next run."""

from __future__ import annotations

import time

import numpy as np
import pytest

from deploy.robot_spec import load_robot_spec
from deploy.wire import CommandMsg, EStopMsg, HeartbeatMsg, HomeMsg, Link, StateFlags, StateMsg, seq_after
from envs.faults.actuator import MotorGain, MotorStall
from envs.faults.catalogue import FAULT_KINDS, WITHIN_SPEC_KINDS, DrawContext, draw_fault, draw_schedule
from envs.faults.clock import ClockDrift, ClockJump
from envs.faults.link import DropFrames, DuplicateFrames, LateFrames
from envs.faults.robot import EStopIgnored, FakeHomed, StrayHomed
from envs.faults.schedule import FaultSchedule, ScheduledFault
from envs.faults.sensor import SensorDrift, SensorFreeze, SensorOffset, SensorScale
from envs.sim_faults import SimFaults
from envs.sim_robot import SimRobot

WAIT_S = 2.0  # upper bound for an answer on a local pty; polls return as soon as it arrives
PUSH_X = np.array([1.0, 0.0, 0.0, 0.0])
DELAY = 2


class Client:
    """Numbered sends; ``ask`` returns the frames the robot sent back for one message (lock-step: at once)."""

    def __init__(self, port: str) -> None:
        self.link = Link(port)
        self.seq = 0

    def send(self, cls, *args) -> None:
        self.seq = seq_after(self.seq)
        self.link.send(cls(self.seq, time.monotonic(), *args))

    def ask(self, cls, *args, expect: int = 1) -> list:
        self.send(cls, *args)
        got: list = []
        deadline = time.monotonic() + (WAIT_S if expect else 0.05)
        while time.monotonic() < deadline and (not expect or len(got) < expect):
            got += self.link.poll(0.01 if not expect else max(0.0, deadline - time.monotonic()))
        return got


@pytest.fixture
def rig():
    robot = SimRobot(mode="lockstep", delay=DELAY, seed=0, obs_noise_std_m=0.0).start()
    client = Client(robot.port_name)
    yield robot, client
    client.link.close()
    robot.stop()


def _with(robot: SimRobot, *faults) -> None:
    """Start ``faults`` now, through a schedule (as a campaign does)."""
    robot.halt()
    robot.rewind(0, SimFaults(schedule=FaultSchedule([ScheduledFault(f, 0, 10_000) for f in faults])))
    robot.start()


def _states(msgs) -> list[StateMsg]:
    return [m for m in msgs if isinstance(m, StateMsg)]


def test_sensor_freeze_reports_one_position_with_new_numbers_while_the_arm_moves(rig):
    robot, client = rig
    _with(robot, SensorFreeze())
    states = [_states(client.ask(CommandMsg, PUSH_X))[0] for _ in range(6)]
    assert len({s.seq for s in states}) == 6
    assert all(np.array_equal(s.state[:3], states[0].state[:3]) for s in states)
    trace = np.array(robot.trace)
    assert trace[-1, 0] - trace[0, 0] > 0.02  # the arm moved 2+ cm along +x, unreported


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (SensorOffset((0.01, -0.02, 0.0)), lambda true, n: true + np.array([0.01, -0.02, 0.0])),
        (SensorDrift((0.001, 0.0, 0.0)), lambda true, n: true + np.array([0.001 * n, 0.0, 0.0])),
    ],
    ids=["offset", "drift"],
)
def test_sensor_offset_and_drift_shift_the_reported_position(rig, fault, expected):
    robot, client = rig
    _with(robot, fault)
    for n in range(1, 4):
        state = _states(client.ask(CommandMsg, PUSH_X))[0]
        np.testing.assert_allclose(state.state[:3], expected(robot.trace[-1], n), atol=1e-12)


def test_sensor_scale_scales_the_motion_since_the_fault_began(rig):
    robot, client = rig
    _with(robot, SensorScale(2.0))
    first = _states(client.ask(CommandMsg, PUSH_X))[0]
    origin = robot.trace[-1].copy()
    np.testing.assert_allclose(first.state[:3], origin)
    later = [_states(client.ask(CommandMsg, PUSH_X))[0] for _ in range(4)][-1]
    np.testing.assert_allclose(later.state[:3], origin + 2.0 * (robot.trace[-1] - origin), atol=1e-12)


def test_motor_stall_keeps_the_arm_still_while_the_line_names_the_commands(rig):
    robot, client = rig
    _with(robot, MotorStall())
    states = [_states(client.ask(CommandMsg, PUSH_X))[0] for _ in range(6)]
    assert states[-1].pending == (client.seq - 1, client.seq)  # the robot says it applies them
    assert np.ptp(np.array(robot.trace)[:, 0]) < 1e-3


def test_motor_gain_moves_the_arm_factor_times_as_far():
    moved = []
    for factor in (1.0, 1.5):
        robot = SimRobot(mode="lockstep", delay=DELAY, seed=0, obs_noise_std_m=0.0).start()
        client = Client(robot.port_name)
        _with(robot, MotorGain(factor))
        for _ in range(8):
            client.ask(CommandMsg, PUSH_X * 0.5)
        moved.append(robot.trace[-1][0] - robot.trace[0][0])
        client.link.close()
        robot.stop()
    assert moved[1] / moved[0] == pytest.approx(1.5, rel=0.05)


def test_frame_faults_drop_duplicate_and_reorder(rig):
    robot, client = rig
    _with(robot, DropFrames(1.0, seed=0))
    assert client.ask(HeartbeatMsg, expect=0) == []
    _with(robot, DuplicateFrames(1.0, seed=0))
    twice = _states(client.ask(HeartbeatMsg, expect=2))
    assert len(twice) == 2 and twice[0] == twice[1]
    _with(robot, LateFrames(1.0, seed=0, behind=1))
    assert client.ask(HeartbeatMsg, expect=0) == []  # held back
    late = _states(client.ask(HeartbeatMsg, expect=1))  # overtaken by nothing yet: the newer one is held too
    assert late and late[0].seq == 1  # the first frame arrives once a later one was sent


def test_clock_jump_and_drift_change_the_stamps(rig):
    robot, client = rig
    _with(robot, ClockJump(100.0))
    jumped = _states(client.ask(HeartbeatMsg))[0]
    assert 100.0 <= jumped.t_s < 101.0  # rewind restarted the clock at 0: the jump is what is left
    _with(robot, ClockDrift(1.0))
    first = _states(client.ask(HeartbeatMsg))[0]
    time.sleep(0.05)  # the drift is measured on the robot's own clock: let some of it pass
    second = _states(client.ask(HeartbeatMsg))[0]
    assert second.t_s - first.t_s >= 2 * 0.05 * 0.9


def test_fake_homed_answers_homed_without_going_home(rig):
    robot, client = rig
    _with(robot, FakeHomed())
    for _ in range(5):
        client.ask(CommandMsg, PUSH_X)
    away = robot.trace[-1].copy()
    homed = _states(client.ask(HomeMsg, 7))[0]
    assert homed.flags & StateFlags.HOMED
    np.testing.assert_allclose(homed.state[:3], robot.gripper_position_m)
    assert np.linalg.norm(robot.gripper_position_m - away) < 0.05  # not back at home (the arm coasts a little)


def test_stray_homed_flags_states_without_homing(rig):
    robot, client = rig
    _with(robot, StrayHomed(2))
    flags = [_states(client.ask(HeartbeatMsg))[0].flags & StateFlags.HOMED for _ in range(3)]
    assert [bool(f) for f in flags] == [True, True, False]
    assert robot.counts["homes"] == 0


def test_estop_ignored_while_the_fault_lasts(rig):
    robot, client = rig
    schedule = FaultSchedule([ScheduledFault(EStopIgnored(), 0, 2)])
    robot.halt()
    robot.rewind(0, SimFaults(schedule=schedule))
    robot.start()
    client.ask(EStopMsg, 0, expect=0)  # robot tick 0: ignored, no answer
    assert not robot.estop_active
    client.ask(HeartbeatMsg)  # tick 1
    states = _states(client.ask(EStopMsg, 0))  # tick 2: the fault is over
    assert states and states[0].flags & StateFlags.ESTOP_ACTIVE


def test_schedule_begins_and_ends_each_fault_at_its_robot_tick(rig):
    robot, client = rig
    schedule = FaultSchedule([ScheduledFault(SensorOffset((1.0, 0.0, 0.0)), 2, 3)])
    robot.halt()
    robot.rewind(0, SimFaults(schedule=schedule))
    robot.start()
    offsets = []
    for _ in range(7):
        state = _states(client.ask(HeartbeatMsg))[0]
        offsets.append(round(float(state.state[0] - robot.gripper_position_m[0]), 6))
    assert offsets == [0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert robot.faults.models == []


def test_rewind_makes_the_robot_as_new(rig):
    robot, client = rig
    for _ in range(4):
        client.ask(CommandMsg, PUSH_X)
    client.send(EStopMsg, 0)  # an e-stop and a frame the client never reads: both gone after rewind
    time.sleep(0.05)
    robot.halt()
    robot.rewind(3)
    robot.start()
    assert robot.steps == 0 and not robot.trace and not robot.estop_active
    state = _states(client.ask(HeartbeatMsg))[0]
    assert state.seq == 1 and state.t_s < 1.0


def test_every_kind_draws_reproducibly_and_within_spec_draws_are_within_the_spec():
    spec = load_robot_spec()
    spec = type(spec)(**{**vars(spec), "observation_noise_std_m": (0.001,) * 3})
    for kind in FAULT_KINDS:
        a = draw_fault(kind, DrawContext(np.random.default_rng(5), spec, 0.01))
        b = draw_fault(kind, DrawContext(np.random.default_rng(5), spec, 0.01))
        assert a.kind == kind and a.params() == b.params()
    for seed in range(50):
        context = DrawContext(np.random.default_rng(seed), spec, 0.01)
        for kind in WITHIN_SPEC_KINDS:
            assert draw_fault(kind, context, within_spec=True).within_spec(spec, 0.01), kind
            assert not draw_fault(kind, context, within_spec=False).within_spec(spec, 0.01), kind
        schedule = draw_schedule(context, 3, horizon_ticks=40, max_duration_ticks=60)
        assert len(schedule) == 3 and all(0 <= s.start < 40 and 1 <= s.duration <= 60 for s in schedule)
    with pytest.raises(ValueError, match="no form the robot spec allows"):
        draw_fault("sensor_freeze", DrawContext(np.random.default_rng(0), spec, 0.01), within_spec=True)

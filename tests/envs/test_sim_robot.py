"""The simulated robot over a real pty: parity with the env, hold, e-stop, HomeMsg, fault injection."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from deploy.wire import (
    SEQ_MAX,
    CommandMsg,
    ErrorCode,
    ErrorMsg,
    EStopMsg,
    EStopReason,
    HeartbeatMsg,
    HomeMsg,
    Link,
    StateFlags,
    StateMsg,
    seq_after,
)
from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.sim_robot import SimRobot
from envs.sim_robot_process import SimRobotProcess

WAIT_S = 2.0  # upper bound for a reply on a local pty; polls return as soon as it arrives
FAST_PERIOD_S = 0.01  # real-time tests run the robot at 100 Hz to stay short
STATE_DIM = 10


class Client:
    """A minimal runtime stand-in: numbered sends, waits for a given message type."""

    def __init__(self, port: str) -> None:
        self.link = Link(port)
        self.seq = 0
        self.inbox: list = []

    def send(self, cls, *args) -> int:
        self.seq = seq_after(self.seq)  # as the runtime numbers: 1..SEQ_MAX, then 1 again
        self.link.send(cls(self.seq, time.monotonic(), *args))
        return self.seq

    def wait(self, cls, predicate=lambda m: True, timeout_s: float = WAIT_S):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for i, msg in enumerate(self.inbox):
                if isinstance(msg, cls) and predicate(msg):
                    del self.inbox[i]
                    return msg
            self.inbox += self.link.poll(max(0.0, deadline - time.monotonic()))
        raise AssertionError(f"no {cls.__name__} within {timeout_s} s; got {self.inbox[-3:]}")

    def state_after(self, cls, *args) -> StateMsg:
        """The first state the robot made after this send (same host: both use time.monotonic)."""
        sent_at = time.monotonic()
        self.send(cls, *args)
        return self.wait(StateMsg, lambda m: m.t_s >= sent_at)


@pytest.fixture
def lockstep():
    robot = SimRobot(mode="lockstep", delay=2, seed=0).start()
    client = Client(robot.port_name)
    yield robot, client
    client.link.close()
    robot.stop()


def test_lockstep_states_equal_the_env_bit_for_bit(lockstep):
    robot, client = lockstep
    env = DelayedFetchReachEnv(delay=2)
    obs, _ = env.reset(seed=11)
    state = client.state_after(HomeMsg, 11)
    assert state.flags & StateFlags.HOMED
    assert state.state.tobytes() == obs["observation"][:STATE_DIM].tobytes()
    rng = np.random.default_rng(0)
    for _ in range(30):
        action = rng.uniform(-1, 1, size=4)
        state = client.state_after(CommandMsg, action)
        obs, *_ = env.step(action)
        assert state.state.tobytes() == obs["observation"][:STATE_DIM].tobytes()
    # the delay line: the last two commands sent, oldest first
    assert state.pending == (client.seq - 1, client.seq)
    assert robot.steps == 30


def test_heartbeat_answers_without_stepping(lockstep):
    robot, client = lockstep
    first = client.state_after(HeartbeatMsg)
    second = client.state_after(HeartbeatMsg)
    assert second.seq > first.seq
    assert second.state.tobytes() == first.state.tobytes()
    assert robot.steps == 0


def test_bad_command_is_held_and_reported(lockstep):
    robot, client = lockstep
    state = client.state_after(CommandMsg, np.array([np.nan, 0.0, 0.0, 0.0]))
    assert client.wait(ErrorMsg).code == ErrorCode.BAD_COMMAND
    assert state.pending[-1] == 0  # the robot inserted a hold
    assert robot.counts["bad_commands"] == 1


def test_runtime_estop_stops_until_home(lockstep):
    robot, client = lockstep
    client.state_after(CommandMsg, np.array([1.0, 0.0, 0.0, 0.0]))
    state = client.state_after(EStopMsg, EStopReason.WATCHDOG)
    assert state.flags & StateFlags.ESTOP_ACTIVE and not state.flags & StateFlags.ESTOP_FROM_ROBOT
    assert state.pending == (0, 0)  # the command in flight was dropped
    before = robot.gripper_position_m
    client.send(CommandMsg, np.array([1.0, 0.0, 0.0, 0.0]))
    assert client.wait(ErrorMsg).code == ErrorCode.ESTOPPED
    # Lock-step: the refused command is still answered by one (e-stopped) state. Take it now, or it can race
    # with the HOME below (it is made just after the error, possibly after state_after's send time).
    assert client.wait(StateMsg).flags & StateFlags.ESTOP_ACTIVE
    np.testing.assert_array_equal(robot.gripper_position_m, before)
    state = client.state_after(HomeMsg, 3)
    assert not state.flags & StateFlags.ESTOP_ACTIVE
    assert client.state_after(CommandMsg, np.zeros(4)).pending[-1] == client.seq


def test_robot_estop_needs_the_operator(lockstep):
    robot, client = lockstep
    robot.trigger_estop(EStopReason.OPERATOR)
    assert client.wait(EStopMsg).reason == EStopReason.OPERATOR
    client.send(HomeMsg, 0)
    assert client.wait(ErrorMsg).code == ErrorCode.ESTOPPED
    state = client.wait(StateMsg)
    assert state.flags & StateFlags.ESTOP_FROM_ROBOT
    robot.release_estop()
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and robot.estop_active:  # the serving thread applies the release
        client.link.poll(0.001)
    state = client.state_after(HomeMsg, 0)
    assert not state.flags & StateFlags.ESTOP_ACTIVE


def test_fault_nan_and_frozen_sensor(lockstep):
    robot, client = lockstep
    robot.faults.nan_state = True
    assert np.all(np.isnan(client.state_after(CommandMsg, np.zeros(4)).state))
    robot.faults.nan_state = False
    good = client.state_after(CommandMsg, np.zeros(4))
    robot.faults.freeze_seq = True
    frozen = []
    for _ in range(3):  # lock-step: exactly one state answers each command, so the next one is the answer
        client.send(CommandMsg, np.array([0.5, 0, 0, 0]))
        frozen.append(client.wait(StateMsg))
    assert all(f == good for f in frozen)  # same seq, same values, while the arm moves
    assert robot.steps == 5


def test_sequence_numbers_wrap_past_the_uint32_limit_to_one_on_both_sides(lockstep):
    """PROTOCOL.md: every sender numbers 1..2^32 - 1 and then 1 again; 0 is never a message's number (in pending
    it is a hold the robot inserted)."""
    robot, client = lockstep
    first = client.state_after(HeartbeatMsg)
    robot.faults.seq_jump = SEQ_MAX - 2 - first.seq  # the robot's next number is SEQ_MAX - 1
    client.seq = SEQ_MAX - 1  # ours: the next command is SEQ_MAX, then 1
    states = [client.state_after(CommandMsg, np.zeros(4)) for _ in range(4)]
    assert [s.seq for s in states] == [SEQ_MAX - 1, SEQ_MAX, 1, 2]
    assert [s.pending for s in states] == [(0, SEQ_MAX), (SEQ_MAX, 1), (1, 2), (2, 3)]


def test_fault_link_cut_and_reply_delay(lockstep):
    robot, client = lockstep
    robot.faults.link_cut = True
    client.send(CommandMsg, np.zeros(4))
    assert client.link.poll(0.05) == []
    assert robot.steps == 0  # the command never arrived
    robot.faults.link_cut = False
    robot.faults.reply_delay_periods = 3
    client.send(CommandMsg, np.zeros(4))
    assert client.link.poll(0.0) == []  # not yet: held back 3 periods
    assert isinstance(client.wait(StateMsg), StateMsg)


def test_fault_corruption_is_caught_by_the_crc(lockstep):
    robot, client = lockstep
    robot.faults.corrupt_prob = 0.01
    received = 0
    for _ in range(60):
        client.send(HeartbeatMsg)
        received += sum(isinstance(m, StateMsg) for m in client.link.poll(0.02))
    assert client.link.decoder.error_count > 0
    assert 0 < received < 60


def test_realtime_holds_when_commands_stop():
    with SimRobot(mode="realtime", delay=2, control_period_s=FAST_PERIOD_S) as robot:
        client = Client(robot.port_name)
        client.send(HomeMsg, 0)
        client.wait(StateMsg, lambda m: m.flags & StateFlags.HOMED)
        states = [client.wait(StateMsg) for _ in range(4)]
        assert all(s.flags & StateFlags.HOLDING for s in states)
        assert all(s.pending == (0, 0) for s in states)
        positions = np.array([s.state[:3] for s in states])
        assert np.ptp(positions, axis=0).max() < 1e-3  # the arm stays put (metres)
        # a command is applied at the next step, exactly once
        seq = client.send(CommandMsg, np.array([0.2, 0.0, 0.0, 0.0]))
        applied = client.wait(StateMsg, lambda m: seq in m.pending)
        later = client.wait(StateMsg, lambda m: m.seq > applied.seq)
        assert later.pending == (seq, 0) and applied.pending == (0, seq)
        client.link.close()


def _relay(server: socket.socket) -> None:
    a, _ = server.accept()
    b, _ = server.accept()
    for s in (a, b):
        s.setblocking(False)
    while True:
        for src, dst in ((a, b), (b, a)):
            try:
                data = src.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not data:
                return
            dst.sendall(data)
        time.sleep(0.0005)


def test_serves_on_a_pyserial_url():
    server = socket.create_server(("127.0.0.1", 0))
    url = f"socket://127.0.0.1:{server.getsockname()[1]}"
    threading.Thread(target=_relay, args=(server,), daemon=True).start()
    with SimRobot(port=url, mode="lockstep") as robot:
        client = Client(url)
        assert client.state_after(CommandMsg, np.zeros(4)).pending[-1] == client.seq
        assert robot.steps == 1
        client.link.close()
    server.close()


def test_subprocess_robot():
    proc = SimRobotProcess(mode="lockstep", delay=2)
    try:
        client = Client(proc.port_name)
        client.state_after(CommandMsg, np.zeros(4))
        client.link.close()
    finally:
        counts = proc.stop()
    assert counts["steps"] == 1


def test_invalid_mode():
    with pytest.raises(ValueError, match="mode must be one of"):
        SimRobot(mode="fast")

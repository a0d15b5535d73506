"""The simulated push cell over a pty: its state carries the tracked block; a tracker glitch moves only the report."""

from __future__ import annotations

import time

import numpy as np

from deploy.wire import CommandMsg, HomeMsg, Link, StateMsg, seq_after
from envs.sim_robot import SimRobot

WAIT_S = 2.0


def ask(link: Link, seq: int, msg_cls, *args) -> StateMsg:
    link.send(msg_cls(seq, time.monotonic(), *args))
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for msg in link.poll(deadline - time.monotonic()):
            if isinstance(msg, StateMsg):
                return msg
    raise AssertionError("no state from the robot")


def test_the_push_state_reports_the_block_and_a_jump_shifts_only_the_report() -> None:
    robot = SimRobot(mode="lockstep", task="push", seed=0).start()
    link = Link(robot.port_name)
    try:
        seq = seq_after(0)
        state = ask(link, seq, HomeMsg, 5)
        assert state.state.shape == (robot.contract.state_dim,) == (25,)
        assert np.abs(state.state[3:6] - robot.block_position_m).max() < 0.006  # the tracker: 1 mm noise
        robot.faults.block_jump((0.1, 0.0, 0.0), frames=1)
        seq = seq_after(seq)
        jumped = ask(link, seq, CommandMsg, np.zeros(4))
        assert 0.094 < jumped.state[3] - robot.block_position_m[0] < 0.106  # reported 10 cm off
        seq = seq_after(seq)
        after = ask(link, seq, CommandMsg, np.zeros(4))
        assert np.abs(after.state[3:6] - robot.block_position_m).max() < 0.006  # one frame only
        assert robot.faults.block_jump_frames == 0
    finally:
        link.close()
        robot.stop()

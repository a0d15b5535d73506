"""CommandLine.applied_length: what the state checker may believe the arm moved between two states."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from deploy.contract import fetch_reach_contract
from deploy.runtime.command_line import UNREPORTED_APPLIED_EXTRA, CommandLine
from deploy.wire import HOLD_SEQ

CONTRACT = fetch_reach_contract(2)


def line_with(commands: dict[int, list[float]]) -> CommandLine:
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    for seq, command in commands.items():
        line.sent(seq, np.array(command), robot_reports_line=True)
    return line


def test_the_commands_that_left_the_line_count_with_their_euclidean_length() -> None:
    line = line_with({1: [0.3, 0.4, 0.0, 0.9], 2: [1.0, 0.0, 0.0, 0.0], 3: [0.0, 0.0, -0.5, 0.0]})
    # old line (1, 2), new line (2, 3): command 1 was applied (length 0.5; the gripper component is no move)
    assert line.applied_length((1, 2), (2, 3), sent_after=2) == pytest.approx(0.5)
    # a command sent after the old state and already applied by the new one counts too
    assert line.applied_length((1, 2), (HOLD_SEQ, HOLD_SEQ), sent_after=2) == pytest.approx(0.5 + 1.0 + 0.5)


def test_holds_and_commands_still_in_the_line_do_not_count() -> None:
    line = line_with({5: [1.0, 0.0, 0.0, 0.0], 6: [1.0, 0.0, 0.0, 0.0]})
    assert line.applied_length((HOLD_SEQ, 5), (5, 6), sent_after=6) == 0.0


def test_a_forgotten_command_counts_as_the_largest_move_both_ways() -> None:
    line = line_with({9: [0.1, 0.0, 0.0, 0.0]})
    largest = 2.0 * max(abs(CONTRACT.action_low), abs(CONTRACT.action_high)) * math.sqrt(3.0)
    assert line.applied_length((4, 9), (9, HOLD_SEQ), sent_after=9) == pytest.approx(largest)


def test_without_reported_lines_the_last_commands_sent_may_have_been_applied() -> None:
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    for seq in range(1, 8):
        line.sent(seq, np.array([0.0, 0.0, float(seq) / 10.0, 0.0]), robot_reports_line=False)
    recent = range(8 - (2 + UNREPORTED_APPLIED_EXTRA), 8)
    assert line.applied_length((), (), sent_after=None) == pytest.approx(sum(seq / 10.0 for seq in recent))


def test_lengths_are_forgotten_with_their_commands() -> None:
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    for seq in range(1, 500):
        line.sent(seq, np.array([1.0, 0.0, 0.0, 0.0]), robot_reports_line=True)
    assert len(line._sent) < 500

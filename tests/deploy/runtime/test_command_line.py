"""CommandLine.applied_length and applied_for_sure: what the state checker may believe the arm moved between two
states, and what it must have followed."""

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


def test_only_the_commands_that_left_the_line_were_applied_for_sure() -> None:
    """The arm must follow what it certainly applied: the old line's commands gone from the new one, per axis. A
    command sent after the old state and absent from the new line may have been lost: not counted."""
    line = line_with({1: [0.3, 0.4, 0.0, 0.9], 2: [1.0, 0.0, 0.0, 0.0], 3: [0.0, 0.0, -0.5, 0.0]})
    assert line.applied_for_sure((1, 2), (2, 3)) == [[0.3, 0.4, 0.0]]  # the gripper component is no move
    assert line.applied_for_sure((1, 2), (HOLD_SEQ, HOLD_SEQ)) == [[0.3, 0.4, 0.0], [1.0, 0.0, 0.0]]
    assert line.applied_for_sure((HOLD_SEQ, 1), (1, 2)) == []  # a hold left: nothing moved the arm


def test_nothing_is_applied_for_sure_without_lines_or_with_a_forgotten_command() -> None:
    line = line_with({9: [0.1, 0.0, 0.0, 0.0]})
    assert line.applied_for_sure((), ()) is None
    assert line.applied_for_sure((5, 9), (9, HOLD_SEQ)) is None  # 5 was never remembered: its move is unknown


NEVER_SENT_OFFSET = 1_000_000  # a robot numbering bug: every command it reports is this much off


def test_a_line_naming_a_command_never_sent_is_told_from_a_forgotten_one() -> None:
    """Sent: commands 10, 12 (11 was a heartbeat). Older than 10: sent and forgotten, or kept by the robot from
    before this loop's first command; 11, 13 and 12 + offset: never sent as commands."""
    line = line_with({10: [0.1, 0.0, 0.0, 0.0], 12: [0.2, 0.0, 0.0, 0.0]})
    assert line.unsent((HOLD_SEQ, 10)) == 0
    assert line.unsent((5, 12)) == 0  # older than anything remembered
    assert line.unsent((11, 12)) == 1  # a heartbeat's number
    assert line.unsent((12, 13)) == 1  # newer than any command sent
    assert line.unsent((10 + NEVER_SENT_OFFSET, 12 + NEVER_SENT_OFFSET)) == 2
    assert CommandLine(CONTRACT, delay_steps=2, counts=Counter()).unsent((7, 8)) == 0  # before the first command


def test_a_line_across_the_sequence_wrap_names_only_commands_sent() -> None:
    top = 2**32 - 1  # the last number before the wrap (0 is the hold)
    line = line_with({top: [0.1, 0.0, 0.0, 0.0], 1: [0.2, 0.0, 0.0, 0.0]})
    assert line.unsent((top, 1)) == 0
    assert line.unsent((1, 2)) == 1


def test_sync_never_moves_acked_seq_to_a_command_never_sent() -> None:
    """Before: a line (11, 12 + offset) moved acked_seq to 12 + offset, so command 12, still in flight, dropped out
    of the barrier's displacement. Now the unknown entry is a hold in the history and acked_seq stays at 11."""
    counts: Counter[str] = Counter()
    line = CommandLine(CONTRACT, delay_steps=2, counts=counts)
    for seq in (10, 11, 12):
        line.sent(seq, np.array([1.0, 0.0, 0.0, 0.0]), robot_reports_line=True)
    line.sync((10, 11))
    assert line.acked_seq == 11
    line.sync((11, 12 + NEVER_SENT_OFFSET))
    assert line.acked_seq == 11
    assert counts["unknown_pending"] == 1
    assert len(line.in_flight()) == 3  # the two reported (11 and a hold) and command 12, sent and not yet reported
    # in flight: 11 and 12 (the hold moves nothing); and 10, applied last, which the arm may still lag
    assert line.displacement_m()[0] == pytest.approx(3.0 * CONTRACT.action_scale_m)


def test_the_barrier_counts_the_newest_applied_command_as_still_to_come() -> None:
    """The simulated Fetch's y axis moves a command's worth a step after the robot reports it applied (campaign seeds
    1000042, 1001875: the arm ended 2-7 mm past a face the barrier planned to stop at): the displacement still to come
    includes the newest command that left the line, and a new episode forgets it."""
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    for seq, x in ((1, 0.2), (2, 0.4), (3, 0.8)):
        line.sent(seq, np.array([x, 0.0, 0.0, 0.0]), robot_reports_line=True)
    line.sync((1, 2))
    assert line.displacement_m()[0] == pytest.approx((0.2 + 0.4 + 0.8) * CONTRACT.action_scale_m)
    line.sync((2, 3))  # 1 applied: the arm may still owe it
    assert line.displacement_m()[0] == pytest.approx((0.2 + 0.4 + 0.8) * CONTRACT.action_scale_m)
    line.sync((3, 0))  # 2 applied and owed; 1 is done
    assert line.displacement_m()[0] == pytest.approx((0.4 + 0.8) * CONTRACT.action_scale_m)
    line.new_episode()
    assert line.displacement_m()[0] == pytest.approx(0.0)


def test_a_command_newer_than_every_command_the_new_line_lists_was_not_applied() -> None:
    """Campaign seed 6001737 (one period of reply latency): command 25 was sent after the state listing (22, 23)
    was made, and counted as possibly applied before 22 and 23, so the reckoned path ran the wrong way and three
    honest states were rejected (``beside_commands``). A line is applied from the front: a command newer than every
    command the new line lists had not reached the robot."""
    line = line_with({22: [1.0, 1.0, 0.0, 0.0], 23: [1.0, 1.0, 0.0, 0.0], 25: [1.0, -1.0, 0.0, 0.0], 26: [0.1] * 4})
    assert line.applied_moves((22, 23), (22, 23), sent_after=23) == []
    assert line.applied_length((22, 23), (22, 23), sent_after=23) == 0.0
    # 22 left the line; 26 is newer than 25, the newest listed: still on its way
    assert line.applied_moves((22, 23), (23, 25), sent_after=23) == [(22, [1.0, 1.0, 0.0])]
    assert line.applied_length((22, 23), (23, 25), sent_after=23) == pytest.approx(math.sqrt(2.0))
    # a command older than the newest listed and absent from both lines came and went unseen (or was lost)
    assert [seq for seq, _ in line.applied_moves((22, 23), (26, HOLD_SEQ), sent_after=23)] == [22, 23, 25]


def test_a_new_line_of_holds_only_bounds_nothing_sent_after_the_old_state() -> None:
    line = line_with({1: [0.3, 0.4, 0.0, 0.0], 2: [1.0, 0.0, 0.0, 0.0], 3: [0.0, 0.0, -0.5, 0.0]})
    assert [seq for seq, _ in line.applied_moves((1, 2), (HOLD_SEQ, HOLD_SEQ), sent_after=2)] == [1, 2, 3]


def test_the_moves_in_flight_are_the_rows_in_flight_after_every_change() -> None:
    """``in_flight_moves`` (the planners' floats) and ``displacement_m`` are kept between changes: each of ``sent``,
    ``sync`` and ``new_episode`` must drop them, or the barrier plans with commands that have left or misses new
    ones."""
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())

    def agrees() -> None:
        rows = line.in_flight()
        assert line.in_flight_moves() == rows[:, :3].tolist()
        owed = line._owed_move or [0.0, 0.0, 0.0]
        expected = (np.asarray(owed) + rows[:, :3].sum(axis=0)) * CONTRACT.action_scale_m
        np.testing.assert_allclose(line.displacement_m(), expected, rtol=0, atol=1e-15)

    agrees()
    for seq, move in ((1, [0.2, -0.1, 0.0, 1.0]), (2, [0.4, 0.3, -0.5, 0.0]), (3, [-0.8, 0.0, 0.1, 0.0])):
        line.sent(seq, np.array(move), robot_reports_line=True)
        agrees()
    for pending in ((1, 2), (2, 3), (3, 0)):
        line.sync(pending)
        agrees()
    assert line.in_flight_moves() == [[-0.8, 0.0, 0.1], [0.0, 0.0, 0.0]]
    line.new_episode()
    agrees()
    assert line.in_flight_moves() == [[0.0, 0.0, 0.0]] * 2  # the robot went home: its delay's worth of holds
    assert line.displacement_m() == [0.0, 0.0, 0.0]


def test_what_may_have_been_applied_is_asked_anew_after_a_command_is_sent() -> None:
    """The answer for two states' lines is kept for the check's second question; a command sent since (which a line
    of holds only cannot rule out) must count at the next question with the same lines."""
    line = line_with({1: [0.3, 0.4, 0.0, 0.0], 2: [1.0, 0.0, 0.0, 0.0]})
    assert line.applied_length((1,), (HOLD_SEQ,), sent_after=1) == pytest.approx(1.5)
    assert [seq for seq, _ in line.applied_moves((1,), (HOLD_SEQ,), sent_after=1)] == [1, 2]
    line.sent(3, np.array([0.0, 0.0, 2.0, 0.0]), robot_reports_line=True)
    assert line.applied_length((1,), (HOLD_SEQ,), sent_after=1) == pytest.approx(3.5)
    assert [seq for seq, _ in line.applied_moves((1,), (HOLD_SEQ,), sent_after=1)] == [1, 2, 3]

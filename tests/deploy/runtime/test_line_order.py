"""The order rules of a reported delay line: listed in the order sent, and following the previous line as a FIFO."""

from __future__ import annotations

import pytest

from deploy.runtime import line_order


@pytest.mark.parametrize(
    ("pending", "out_of_order"),
    [
        ((5, 6), False),
        ((0, 6), False),  # a hold the robot inserted
        ((5, 0, 6), False),
        ((6, 5), True),  # newest first: the robot's line bookkeeping is reversed
        ((6, 0, 5), True),
        ((5, 5), True),  # a command twice (dropped as malformed before this, but not in order either)
        ((2**32 - 1, 1), False),  # across the sequence wrap, in order
        ((1, 2**32 - 1), True),
    ],
)
def test_a_line_must_list_its_commands_in_the_order_they_were_sent(pending, out_of_order) -> None:
    assert line_order.out_of_order(pending) is out_of_order


@pytest.mark.parametrize(
    ("old", "new", "relisted"),
    [
        ((5, 6), (6, 7), False),  # 5 applied, 7 entered
        ((5, 6), (5, 6), False),  # nothing applied this tick
        ((5, 6), (0, 7), False),  # a hold the robot inserted
        ((5, 6), (4, 7), True),  # 4 left the line before 5: applied, listed again
        ((5, 6), (4, 5), True),
        ((0, 5), (4, 5), True),  # the hold is skipped: 5 was the oldest listed
        ((0, 0), (4, 5), False),  # a line of holds only (after a HOME) bounds nothing
        ((), (4, 5), False),  # no previous line
        ((2**32 - 1, 1), (2**32 - 2, 1), True),  # across the sequence wrap
        ((2**32 - 1, 1), (1, 2), False),
        ((5, 6), (5, 7), True),  # 6 left before 5: the robot kept listing the command it applied (popped late)
        ((5, 6, 7), (5, 7, 8), True),  # one gone from the middle
        ((5, 0, 6), (6, 7, 8), False),
        ((5, 6), (7, 8), False),  # both applied within one state
        ((5, 7), (6, 8), True),  # 6 was sent before 7 but not listed with it: it cannot enter the line later
        ((5, 7), (7, 8), False),  # 6 lost on the link: a gap is no contradiction
    ],
)
def test_a_line_must_follow_from_the_previous_one_as_a_fifo(old, new, relisted) -> None:
    assert line_order.not_fifo(old, new) is relisted

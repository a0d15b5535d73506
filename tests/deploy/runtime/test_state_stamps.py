"""The state checker's stamp and sequence part alone: ``StampCheck`` and ``RestartChain``. Units: seconds, messages."""

from __future__ import annotations

import pytest

from deploy.runtime.state_stamps import (
    MSGS_PER_STEP,
    SEQ_BACKWARDS,
    SEQ_GAP,
    TIME_AHEAD,
    TIME_BACKWARDS,
    RestartChain,
    Seen,
    StampCheck,
)

PERIOD_S = 0.04


def seen(seq: int, t_robot: float, t_recv: float, prompts: int = 0) -> Seen:
    return Seen(seq, t_robot, t_recv, [0.0, 0.0, 0.0], (), [0.0, 0.0, 0.0], prompts)


def test_stamps_judge_time_then_numbering():
    stamps = StampCheck(PERIOD_S, PERIOD_S, clock_tolerance_s=0.05, seq_gap_slack=4)
    anchor = seen(10, 1.0, 1.1)
    assert stamps.kind(seen(10, 1.04, 1.14), anchor, offset_s=0.1) == SEQ_BACKWARDS
    assert stamps.kind(seen(11, 1.0, 1.14), anchor, offset_s=0.1) == TIME_BACKWARDS
    assert stamps.kind(seen(11, 1.2, 1.14), anchor, offset_s=0.1) == TIME_AHEAD  # 1.3 local > 1.14 + 0.05
    assert stamps.kind(seen(11, 1.04, 1.14), anchor, offset_s=0.1) == ""
    # 0.03 s: one period, 4 slack + 2 per step = 6 messages allowed; 7 is a gap
    assert stamps.kind(seen(16, 1.03, 1.12), anchor, offset_s=0.1) == ""
    assert stamps.kind(seen(17, 1.03, 1.12), anchor, offset_s=0.1) == SEQ_GAP
    # each message the loop sent may be answered: 3 prompts explain 3 * MSGS_PER_STEP more
    assert not stamps.seq_gap(anchor, seen(16 + 3 * MSGS_PER_STEP, 1.03, 1.12, prompts=3))
    assert stamps.seq_gap(anchor, seen(17 + 3 * MSGS_PER_STEP, 1.03, 1.12, prompts=3))


def test_elapsed_time_is_the_robots_clock_or_a_period_per_message():
    stamps = StampCheck(PERIOD_S, 0.05, clock_tolerance_s=0.05, seq_gap_slack=4)
    assert stamps.elapsed_s(seen(14, 1.01, 0.0), seen(10, 1.0, 0.0)) == 0.2  # 4 messages x 0.05 s > 0.01 s
    assert stamps.elapsed_s(seen(11, 2.0, 0.0), seen(10, 1.0, 0.0)) == 1.0


def test_a_chain_confirms_a_restart_only_when_begun_by_a_break_a_restart_explains():
    chain = RestartChain(3, consistent=lambda older, newer: newer.seq == older.seq + 1)
    assert not chain.add(seen(1, 0.0, 0.3), TIME_BACKWARDS)
    assert not chain.add(seen(2, 0.04, 0.32), TIME_BACKWARDS)
    assert chain.add(seen(3, 0.08, 0.35), TIME_BACKWARDS)
    assert chain.fastest_transit_s() == pytest.approx(0.27)  # transits 0.3, 0.28, 0.27
    assert not chain.add(seen(9, 0.2, 0.4), "outside_envelope")  # inconsistent: a new chain of a value fault
    assert not chain.add(seen(10, 0.24, 0.44), TIME_BACKWARDS) and not chain.add(seen(11, 0.28, 0.48), SEQ_GAP)
    assert chain.kind == "outside_envelope" and len(chain.states) == 3


def test_a_chain_only_ahead_shows_an_overestimated_offset():
    chain = RestartChain(3, consistent=lambda older, newer: True)
    chain.add(seen(1, 1.0, 1.0), TIME_AHEAD)
    assert not chain.only_ahead(seen(2, 1.04, 1.03))  # 2 of 3
    chain.add(seen(2, 1.04, 1.03), TIME_AHEAD)
    last = seen(3, 1.08, 1.02)
    assert chain.only_ahead(last) and chain.fastest_transit_s(last) == pytest.approx(-0.06)
    chain.clear()
    assert not chain.only_ahead(seen(4, 1.12, 1.1))

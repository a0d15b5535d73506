"""The retract toward home alone: its command law, when it is over (near home, or its steps spent; each counted), the
settings it refuses, and what the barrier reports of an arm still retracting."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from deploy.runtime.retract import (
    RETRACT_GAIN,
    RETRACT_STEPS,
    RETRACTS_COMPLETE,
    RETRACTS_INCOMPLETE,
    RetractedEpisodes,
    Retraction,
)
from deploy.runtime.state_machine import LoopState, StateMachine

HOME = (1.34, 0.75, 0.53)
SCALE_M = 0.05  # metres per command unit


def retraction(max_steps: int = 10, tolerance_m: float = 0.02, counts: Counter | None = None) -> Retraction:
    return Retraction(HOME, tolerance_m, max_steps, SCALE_M, 1.0, 4, Counter() if counts is None else counts)


def test_the_command_is_a_share_of_the_way_home_clipped_to_the_largest_command() -> None:
    part = retraction()
    part.start()
    near = np.array([1.34, 0.75 + 0.05, 0.53 - 0.03, 0.0])  # 5 cm off on y, 3 cm under on z
    command = part.command(near)
    assert command is not None and command.shape == (4,)
    assert command[:3] == pytest.approx([0.0, -RETRACT_GAIN * 1.0, RETRACT_GAIN * 0.6])
    assert command[3] == 0.0  # the gripper entry is left alone
    far = np.array([1.64, 0.75, 0.53])  # 30 cm away: six commands' worth, clipped to one
    assert retraction().command(far)[:3] == pytest.approx([-1.0, 0.0, 0.0])  # type: ignore[index]


def test_it_is_over_within_the_tolerance_and_counted_complete() -> None:
    counts: Counter = Counter()
    part = retraction(counts=counts)
    part.start()
    assert part.command(np.array([1.34, 0.75, 0.53 + 0.019])) is None
    assert counts[RETRACTS_COMPLETE] == 1 and counts[RETRACT_STEPS] == 0


def test_it_is_over_after_its_steps_and_counted_incomplete() -> None:
    counts: Counter = Counter()
    part = retraction(max_steps=3, counts=counts)
    away = np.array([1.5, 0.75, 0.53])
    part.start()
    assert all(part.command(away) is not None for _ in range(3))
    assert part.command(away) is None
    assert counts[RETRACTS_INCOMPLETE] == 1 and counts[RETRACT_STEPS] == 3
    part.start()  # the next episode's retract has its own budget
    assert part.command(away) is not None


def test_no_retract_without_a_home_or_with_bad_settings() -> None:
    assert not Retraction(None, 0.02, 0, SCALE_M, 1.0, 4, Counter()).enabled  # off: no home needed
    with pytest.raises(ValueError, match="home.position_m"):
        Retraction(None, 0.02, 10, SCALE_M, 1.0, 4, Counter())
    with pytest.raises(ValueError, match="max_steps"):
        retraction(max_steps=-1)
    with pytest.raises(ValueError, match="tolerance_m"):
        retraction(tolerance_m=0.0)


class Ended:
    ended = 4


def test_the_episode_counts_as_ended_once_the_retract_is_over() -> None:
    # the loop asks whether it may HOME (the partner's count against this one) right after the retract's last
    # command, still in RETRACT: by then the episode must count as ended, or a partner starting together is not
    # waited for
    modes = StateMachine()
    for state in (LoopState.WAIT_FRESH, LoopState.HOLD, LoopState.HOMING, LoopState.RUN, LoopState.RETRACT):
        modes.to(state, 0, "test")
    part = retraction(max_steps=2)
    count = RetractedEpisodes(Ended(), part, modes)
    part.start()
    away = np.array([1.5, 0.75, 0.53])
    assert part.command(away) is not None and count.ended == 3
    assert part.command(away) is not None and count.ended == 3
    assert part.command(away) is None and count.ended == 4
    part.start()
    assert count.ended == 3
    modes.to(LoopState.SAFE_STOP, 1, "a stop leaves RETRACT")
    assert count.ended == 4  # a retract a stop cut short is over too

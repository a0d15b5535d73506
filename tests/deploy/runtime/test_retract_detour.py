"""The retract's give-way rule alone: nothing while the way home shortens; once it has stalled, a give-way away from
the partner and to the right of the way home (never to the right toward the partner), held for its steps and then
judged afresh; two arms head-on in the cell give way to opposite sides; settings it refuses."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from deploy.cell.layout import CellLayout, mirror_vector
from deploy.runtime.retract_detour import (
    DETOUR_HOLD_STEPS,
    DETOUR_PROGRESS_M,
    DETOUR_SHARE,
    DETOUR_WINDOW_STEPS,
    RETRACT_DETOURS,
    Detour,
)

HEAD_ON = np.array([0.3, 0.0, 0.0])  # gripper minus partner: the partner is behind along -x, home ahead along +x


def stalled(detour: Detour, offset: np.ndarray, from_partner: np.ndarray | None) -> np.ndarray:
    """Feed a retract that does not move until the give-way starts; its first command."""
    for _ in range(DETOUR_WINDOW_STEPS):  # not judged before the window is full
        assert detour.command(offset, from_partner) is None
    command = detour.command(offset, from_partner)
    assert command is not None
    return command


def test_nothing_while_the_way_home_shortens() -> None:
    detour = Detour(1.0, Counter())
    for distance in np.linspace(0.30, 0.10, 20):  # 10 mm closer per step
        assert detour.command(np.array([distance, 0.0, 0.0]), HEAD_ON) is None


def test_a_stall_gives_way_away_and_to_the_right_for_its_steps() -> None:
    counts: Counter = Counter()
    detour = Detour(1.0, counts)
    offset = np.array([0.2, 0.0, 0.0])  # home ahead along +x
    from_partner = np.array([0.0, 0.0, 0.3])  # the partner straight below
    first = stalled(detour, offset, from_partner)
    # away: +z; right of +x with z up: -y; the sum at DETOUR_SHARE of the largest command
    assert first == pytest.approx(DETOUR_SHARE * np.array([0.0, -1.0, 1.0]) / np.sqrt(2))
    for _ in range(DETOUR_HOLD_STEPS - 1):
        assert detour.command(offset, from_partner) == pytest.approx(first)
    assert counts[RETRACT_DETOURS] == 1
    # judged afresh after the give-way: the window fills again before the next one
    assert stalled(detour, offset, from_partner) is not None and counts[RETRACT_DETOURS] == 2


def test_never_to_the_right_toward_the_partner() -> None:
    # home ahead along +y; right is +x, where the partner stands: of the step right only the part across the line to
    # the partner is kept, so the give-way is away from it (nearly straight: the partner is nearly dead right)
    from_partner = np.array([-0.3, -0.02, 0.0])
    command = stalled(Detour(1.0, Counter()), np.array([0.0, 0.05, 0.0]), from_partner)
    away = from_partner / np.linalg.norm(from_partner)
    assert np.linalg.norm(command) == pytest.approx(DETOUR_SHARE)
    assert float(command @ away) > 0.99 * DETOUR_SHARE


def test_without_a_partner_report_it_steps_right() -> None:
    assert stalled(Detour(1.0, Counter()), np.array([0.0, 0.2, 0.0]), None) == pytest.approx([DETOUR_SHARE, 0, 0])


@pytest.mark.parametrize("from_partner", [[np.nan, 0.0, 0.0], [np.inf, 1.0, 0.0], [0.0, 0.0, 0.0]])
def test_a_partner_with_no_direction_is_left_out(from_partner) -> None:
    # a report the barrier would refuse, or a partner at the gripper itself: the give-way steps right only, finite
    command = stalled(Detour(1.0, Counter()), np.array([0.0, 0.2, 0.0]), np.array(from_partner))
    assert command == pytest.approx([DETOUR_SHARE, 0.0, 0.0])


def test_progress_just_under_the_threshold_is_a_stall() -> None:
    detour = Detour(1.0, Counter())
    creep = 0.9 * DETOUR_PROGRESS_M / DETOUR_WINDOW_STEPS
    for k in range(DETOUR_WINDOW_STEPS):
        assert detour.command(np.array([0.2 - k * creep, 0.0, 0.0]), HEAD_ON) is None
    assert detour.command(np.array([0.2 - DETOUR_WINDOW_STEPS * creep, 0.0, 0.0]), HEAD_ON) is not None


def test_two_arms_head_on_give_way_to_opposite_sides_in_the_cell() -> None:
    layout = CellLayout(centre_xy=(1.3, 0.9))
    home = np.array([1.34, 0.75, 0.53])  # each arm's, in its own frame
    partner_home = [np.array(layout.point_to_cell(1 - arm, home)) for arm in (0, 1)]  # cell frame
    grips = []  # cell frame: each on the line between the homes, nearer the partner's home, heading for its own
    for arm in (0, 1):
        own = np.array(layout.point_to_cell(arm, home))
        grips.append(partner_home[arm] + 0.3 * (own - partner_home[arm]))
    moves = []
    for arm in (0, 1):
        grip = np.array(layout.point_to_cell(arm, grips[arm]))  # arm frame
        partner = np.array(layout.point_to_cell(arm, grips[1 - arm]))
        command = stalled(Detour(1.0, Counter()), home - grip, grip - partner)  # arm frame, command units
        moves.append(command if arm == 0 else mirror_vector(command))  # cell frame
    across = np.cross(grips[1] - grips[0], [0.0, 0.0, 1.0])[:2]  # horizontal, across the line between them
    sides = [float(move[:2] @ across) for move in moves]
    assert sides[0] * sides[1] < 0  # they step to opposite sides of the line
    for arm in (0, 1):  # and each backs away from the other
        assert float(moves[arm] @ (grips[arm] - grips[1 - arm])) > 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="control step"):
        Detour(1.0, Counter(), window_steps=0)
    with pytest.raises(ValueError, match="progress_m"):
        Detour(1.0, Counter(), progress_m=0.0)
    with pytest.raises(ValueError, match="share"):
        Detour(1.0, Counter(), share=1.5)

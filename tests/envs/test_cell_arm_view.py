"""CellArmView-v0: one arm of the two-arm cell in its package's layout (robot state, partner, history), the partner
scripted or held; what an arm package's export checks run."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers CellArmView-v0)
from deploy.cell.policy_input import PARTNER_FIELD
from envs.cell_arm_view import CellArmView
from envs.two_arm_cell import ACTION_DIM, PARTNER_DIM, STATE_DIM

CELL = {"delay": 1, "max_episode_steps": 8}


def test_the_view_is_the_cells_row_in_the_package_layout() -> None:
    view = CellArmView(arm=1, partner="hold", **CELL)
    obs, _ = view.reset(seed=4)
    row = view.cell.reset(seed=4)[0]["observation"][1]
    history = ACTION_DIM * view.cell.history_len
    assert np.array_equal(obs["observation"][:STATE_DIM], row[:STATE_DIM])
    partner = dict((name, lo) for name, lo, _ in view.contract.field_spans())[PARTNER_FIELD]
    assert np.array_equal(obs["observation"][partner : partner + PARTNER_DIM], row[STATE_DIM + history :])
    assert np.array_equal(obs["observation"][partner + PARTNER_DIM :], row[STATE_DIM : STATE_DIM + history])
    assert obs["observation"].shape == view.observation_space["observation"].shape
    view.close()


def test_a_held_partner_stays_and_a_goal_seeker_moves() -> None:
    for partner, moves in (("hold", False), ("goal_seeker", True)):
        view = CellArmView(arm=0, partner=partner, **CELL)
        view.reset(seed=2)
        start = view.cell.scene.grip_pos(1)
        for _ in range(5):
            _, reward, _, _, info = view.step(np.zeros(ACTION_DIM))
            assert reward in (0.0, -1.0) and "team_success" in info
        moved = np.linalg.norm(view.cell.scene.grip_pos(1) - start)
        assert (moved > 0.01) == moves, f"partner {partner}: moved {moved:.4f} m"
        view.close()


def test_registered_and_bad_arguments_refused() -> None:
    env = gym.make("CellArmView-v0", arm=1, **CELL)
    assert env.unwrapped.arm == 1
    env.close()
    with pytest.raises(ValueError, match="arm must be 0 or 1"):
        CellArmView(arm=2)
    with pytest.raises(ValueError, match="partner must be one of"):
        CellArmView(partner="chase")

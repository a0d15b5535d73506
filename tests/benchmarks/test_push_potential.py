"""The pushing-pose potential of benchmarks/push_potential.py, by hand."""

import numpy as np
import pytest

from benchmarks.push_potential import BEHIND_M, GOAL_COEF, LIFT_M, REACH_COEF, push_potential, push_shaping

BLOCK = np.array([1.30, 0.80, 0.425])
GOAL = np.array([1.30, 0.70, 0.425])  # 10 cm in -y of the block: the pushing pose is 5 cm in +y of it


def state(gripper: np.ndarray) -> np.ndarray:
    """A flat Fetch object observation with only the positions set: gripper xyz, block xyz."""
    return np.concatenate([gripper, BLOCK, np.zeros(19)])


def test_at_the_pushing_pose_only_the_block_to_goal_distance_counts():
    pose = BLOCK + np.array([0.0, BEHIND_M, 0.0])
    assert push_potential(state(pose), GOAL) == pytest.approx(-GOAL_COEF * 0.10)


def test_away_from_the_pose_the_gripper_is_asked_to_pass_over_the_block():
    # 10 cm in +x of the pose at the block's height: 0.10 m in xy plus LIFT_M of height to make up
    gripper = BLOCK + np.array([0.10, BEHIND_M, 0.0])
    expected = -(REACH_COEF * (0.10 + LIFT_M) + GOAL_COEF * 0.10)
    assert push_potential(state(gripper), GOAL) == pytest.approx(expected)
    # the same point LIFT_M higher has no height to make up
    higher = gripper + np.array([0.0, 0.0, LIFT_M])
    assert push_potential(state(higher), GOAL) == pytest.approx(-(REACH_COEF * 0.10 + GOAL_COEF * 0.10))


def test_shaping_is_the_potential_difference_and_telescopes_over_an_episode():
    rng = np.random.default_rng(0)
    T = 6
    grippers = BLOCK + rng.uniform(-0.1, 0.1, size=(T, 3))
    obs = np.stack([state(g) for g in grippers])[:, None, None, :]  # [T, n_groups=1, G=1, D]
    shaping = push_shaping(obs, GOAL)[:, 0, 0]
    phi = push_potential(obs, GOAL)[:, 0, 0]
    np.testing.assert_allclose(shaping[:-1], np.diff(phi), rtol=1e-5)
    assert shaping[-1] == 0.0  # the state after the last step is not stored
    assert shaping.sum() == pytest.approx(phi[-1] - phi[0], rel=1e-5)

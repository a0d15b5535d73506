"""NearGoalStarts: the block between its drawn start and the goal, the gripper behind it, on fresh resets only."""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.near_goal_starts import BEHIND_GAP_M, BLOCK_HALF_SIZE_M, NearGoalStarts

GRIPPER, BLOCK = slice(0, 3), slice(3, 6)


def layout(obs):
    """(block-to-goal distance, gripper behind the block along the push, gripper off the push line), metres."""
    state, goal = obs["observation"], obs["desired_goal"]
    push = goal[:2] - state[BLOCK][:2]
    length = float(np.linalg.norm(push))
    push /= length
    offset = state[BLOCK][:2] - state[GRIPPER][:2]
    return length, float(offset @ push), float(abs(push[0] * offset[1] - push[1] * offset[0]))


def test_every_start_is_a_short_straight_push_on_the_goal_line():
    env = gym.make("DelayedFetchPush-v0", near_goal_share=1.0)
    plain = gym.make("DelayedFetchPush-v0")
    for seed in range(8):
        obs, _ = env.reset(seed=seed)
        drawn, _ = plain.reset(seed=seed)
        np.testing.assert_array_equal(obs["desired_goal"], drawn["desired_goal"])  # the task's goal, kept
        length, behind, aside = layout(obs)
        drawn_length = layout(drawn)[0]
        assert env.unwrapped.distance_threshold < length <= drawn_length + 1e-9
        assert behind == pytest.approx(BLOCK_HALF_SIZE_M + BEHIND_GAP_M, abs=0.005)
        assert aside < 0.005
        assert not env.step(np.zeros(4))[4]["is_success"]


def test_a_share_of_zero_is_the_task_itself_bit_for_bit():
    env = gym.make("DelayedFetchPush-v0", near_goal_share=0.0)
    plain = gym.make("DelayedFetchPush-v0")
    for seed in range(3):
        obs, plain_obs = env.reset(seed=seed)[0], plain.reset(seed=seed)[0]
        for key in obs:
            np.testing.assert_array_equal(obs[key], plain_obs[key])


def test_a_snapshot_restores_the_placed_start_and_places_nothing_anew():
    env = gym.make("DelayedFetchPush-v0", near_goal_share=1.0)
    obs, _ = env.reset(seed=3)
    snapshot = env.get_wrapper_attr("snapshot")()
    placed = env.get_wrapper_attr("placed")
    restored, _ = env.reset(options={"snapshot": snapshot})
    assert env.get_wrapper_attr("placed") == placed
    for key in obs:
        np.testing.assert_array_equal(restored[key], obs[key])


def test_goals_in_the_air_and_bad_shares_are_left_alone_or_refused():
    env = gym.make("DelayedFetchPickAndPlace-v0", near_goal_share=1.0)
    starts = [env.reset(seed=seed)[0] for seed in range(12)]
    assert env.get_wrapper_attr("placed") < len(starts)  # about half the goals are in the air: not placed
    with pytest.raises(ValueError, match=r"share must be in \[0, 1\]"):
        gym.make("DelayedFetchPush-v0", near_goal_share=1.5)
    with pytest.raises(ValueError, match="has no object to push"):
        NearGoalStarts(gym.make("FetchReach-v4"), 0.5)

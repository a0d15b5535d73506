"""The Fetch object tasks' reaching bonus: new closest gripper-to-object approach, reported as the goal-free reward."""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.object_approach import REWARD_OFFSET_KEY, ObjectApproachReward, gripper_to_object_m
from robot_grpo.buffers import REWARD_OFFSET_KEY as BUFFER_KEY


def _toward_and_away(obs: dict[str, np.ndarray], toward: bool) -> np.ndarray:
    """A command moving the gripper straight toward (or away from) the object, full speed."""
    state = obs["observation"]
    direction = state[3:6] - state[0:3]
    step = direction / np.linalg.norm(direction) * (1.0 if toward else -1.0)
    return np.array([*step, 0.0])


def test_only_new_closest_approach_is_paid_and_success_is_untouched():
    plain = gym.make("DelayedFetchPush-v0", delay=0)
    shaped = gym.make("DelayedFetchPush-v0", delay=0, approach_coef=5.0)
    plain.reset(seed=3)
    obs, _ = shaped.reset(seed=3)
    closest_m = start_m = gripper_to_object_m(obs)
    paid = 0.0
    for toward in (True, True, False, False, True):
        action = _toward_and_away(obs, toward)
        obs, reward, _, _, info = shaped.step(action)
        _, plain_reward, _, _, plain_info = plain.step(action)
        distance_m = gripper_to_object_m(obs)
        assert info[REWARD_OFFSET_KEY] == pytest.approx(5.0 * max(0.0, closest_m - distance_m))
        assert info[REWARD_OFFSET_KEY] >= 0.0 and (info[REWARD_OFFSET_KEY] > 0) == (distance_m < closest_m)
        assert reward == pytest.approx(plain_reward + info[REWARD_OFFSET_KEY])
        assert info["is_success"] == plain_info["is_success"]
        closest_m, paid = min(closest_m, distance_m), paid + info[REWARD_OFFSET_KEY]
    assert paid == pytest.approx(5.0 * (start_m - closest_m))  # the episode's total: coef * (d_0 - min d)


def test_a_snapshot_carries_the_closest_approach_so_far():
    env = gym.make("DelayedFetchPush-v0", delay=0, approach_coef=5.0)
    obs, _ = env.reset(seed=4)
    for _ in range(3):
        obs, *_ = env.step(_toward_and_away(obs, toward=True))
    snapshot = env.get_wrapper_attr("snapshot")()
    away = _toward_and_away(obs, toward=False)
    first = [env.step(away)[1] for _ in range(2)]
    env.reset(options={"snapshot": snapshot})
    assert [env.step(away)[1] for _ in range(2)] == first  # no bonus after a restore either: closest is kept


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="FetchReach has no object"):
        ObjectApproachReward(gym.make("FetchReach-v4"), 1.0)
    for coef in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="coef"):
            ObjectApproachReward(gym.make("FetchPush-v4"), coef)
    for coef in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="approach_coef"):
            gym.make("DelayedFetchPush-v0", approach_coef=coef)


def test_the_env_and_the_learner_use_one_info_key():
    assert REWARD_OFFSET_KEY == BUFFER_KEY

"""Cached Fetch lookups: the observation, reward and physics stay bit-identical to gymnasium-robotics' own."""

from __future__ import annotations

import gymnasium as gym
import gymnasium_robotics  # noqa: F401  (registers the Fetch ids)
import numpy as np
import pytest

import envs.fetch_lookups as fetch_lookups
from envs.fetch_lookups import cache_fetch_lookups

STEPS = 50
TASKS = ("FetchReach-v4", "FetchPush-v4", "FetchPickAndPlace-v4", "FetchSlide-v4")


@pytest.mark.parametrize("task", TASKS)
def test_cached_env_steps_bit_identical_to_the_original(task: str) -> None:
    original, cached = gym.make(task), gym.make(task)
    cache_fetch_lookups(cached.unwrapped)
    obs_a, _ = original.reset(seed=7)
    obs_b, _ = cached.reset(seed=7)
    rng = np.random.default_rng(0)
    for _ in range(STEPS):  # random actions move the arm (and push the object), so velocities are non-zero
        action = rng.uniform(-1.0, 1.0, size=original.action_space.shape)
        obs_a, reward_a, *_ = original.step(action)
        obs_b, reward_b, *_ = cached.step(action)
        for key in obs_a:
            assert obs_a[key].tobytes() == obs_b[key].tobytes(), key
        assert reward_a == reward_b
    assert np.abs(obs_b["observation"][-5:]).max() > 0  # the velocities that were compared are not all zero
    assert original.unwrapped.data.qpos.tobytes() == cached.unwrapped.data.qpos.tobytes()


def test_a_field_that_moved_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gymnasium-robotics whose observation the cached reader no longer matches fails at construction."""
    monkeypatch.setattr(fetch_lookups, "GRIPPER_JOINTS_OBSERVED", 3)  # as if the gripper state grew a joint
    env = gym.make("FetchPush-v4")
    with pytest.raises(RuntimeError, match="differs from gymnasium-robotics' own"):
        cache_fetch_lookups(env.unwrapped)

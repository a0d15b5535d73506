"""gymnasium's env checker passes for both envs, made through the registry, with delay 0 and 3."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the ids)

# FetchReach itself declares unbounded Box observations; the checker warns about that, which is expected.
UNBOUNDED_BOX_WARNING = "A Box observation space"


@pytest.mark.parametrize("env_id", ["PointReach-v0", "DelayedFetchReach-v0"])
@pytest.mark.parametrize("delay", [0, 3])
def test_check_env_passes(env_id: str, delay: int) -> None:
    env = gym.make(env_id, delay=delay, obs_noise_std_m=0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    unexpected = [str(w.message) for w in caught if UNBOUNDED_BOX_WARNING not in str(w.message)]
    assert not unexpected, unexpected
    obs, _ = env.reset(seed=0)
    assert obs["observation"].shape == (env.unwrapped.contract.observation_dim,)
    env.close()


@pytest.mark.parametrize("env_id", ["PointReach-v0", "DelayedFetchReach-v0"])
def test_check_env_passes_with_noise_and_random_delay(env_id: str) -> None:
    env = gym.make(env_id, delay_range=(0, 3), obs_noise_std_m=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("env_id", ["PointReach-v0", "DelayedFetchReach-v0"])
def test_observation_matches_the_contract(env_id: str) -> None:
    """The env builds its observation exactly as contract.build does (the runtime uses the same function)."""
    env = gym.make(env_id, delay=2).unwrapped
    obs, _ = env.reset(seed=1)
    for t in range(5):
        obs, *_ = env.step(np.full(env.action_space.shape, 0.1 * t))
    state = env._physics_state()
    expected = env.contract.build(state, env.history, env.goal)
    for key in ("observation", "achieved_goal", "desired_goal"):
        assert obs[key].dtype == expected[key].dtype
        np.testing.assert_array_equal(obs[key], expected[key])
    assert env.observation_space.contains(obs)
    env.close()

"""ThreadedVecEnv: the same observations, rewards, dones and infos as DummyVecEnv, and GRPO trains identically."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

import envs  # noqa: F401  (registers the ids)
from robot_grpo import GRPO
from robot_grpo.threaded_vec_env import ThreadedVecEnv


def pair(env_id: str, n_envs: int, env_kwargs: dict, seed: int = 3):
    dummy = make_vec_env(env_id, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs, vec_env_cls=DummyVecEnv)
    threaded = make_vec_env(
        env_id,
        n_envs=n_envs,
        seed=seed,
        env_kwargs=env_kwargs,
        vec_env_cls=ThreadedVecEnv,
        vec_env_kwargs={"n_threads": 2},
    )
    return dummy, threaded


@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "steps"),
    [("PointReach-v0", {"delay": 1, "max_episode_steps": 7}, 30), ("DelayedFetchReach-v0", {"delay": 2}, 60)],
)
def test_steps_match_dummy_vec_env_bit_for_bit(env_id, env_kwargs, steps):
    dummy, threaded = pair(env_id, 5, env_kwargs)  # 5 envs on 2 threads: uneven slices of 3 and 2
    obs_d, obs_t = dummy.reset(), threaded.reset()
    rng = np.random.default_rng(0)
    resets = 0
    for _ in range(steps):
        actions = rng.uniform(-1, 1, size=(5, *dummy.action_space.shape)).astype(np.float32)
        obs_d, rew_d, done_d, info_d = dummy.step(actions)
        obs_t, rew_t, done_t, info_t = threaded.step(actions)
        for key in obs_d:
            np.testing.assert_array_equal(obs_d[key], obs_t[key])
        np.testing.assert_array_equal(rew_d, rew_t)
        np.testing.assert_array_equal(done_d, done_t)
        for a, b in zip(info_d, info_t, strict=True):
            assert a.keys() == b.keys() and a["TimeLimit.truncated"] == b["TimeLimit.truncated"]
            if "terminal_observation" in a:
                resets += 1
                for key in a["terminal_observation"]:
                    np.testing.assert_array_equal(a["terminal_observation"][key], b["terminal_observation"][key])
    assert resets > 0  # the auto-reset path ran
    dummy.close()
    threaded.close()
    with pytest.raises(RuntimeError, match="closed"):
        threaded.step(actions)


def test_grpo_trains_to_the_same_weights():
    kwargs = {"group_size": 4, "n_groups": 2, "batch_size": 128, "n_epochs": 2, "policy_kwargs": {"net_arch": [16]}}
    weights = []
    for env in pair("PointReach-v0", 8, {"delay": 1, "max_episode_steps": 10}, seed=0):
        model = GRPO("MultiInputPolicy", env, seed=0, **kwargs)
        model.learn(160)
        weights.append([p.detach().clone() for p in model.policy.parameters()])
    for a, b in zip(*weights, strict=True):
        assert np.array_equal(a.numpy(), b.numpy())


def test_thread_count_is_checked():
    with pytest.raises(ValueError, match="n_threads must be >= 1"):
        ThreadedVecEnv([lambda: None], n_threads=0)

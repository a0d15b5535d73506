"""compute_reward (vectorized, for hindsight) equals the per-step reward; delay randomization; observation noise."""

from __future__ import annotations

import numpy as np
import pytest

from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.point_reach import PointReachEnv

N_TRANSITIONS = 120
NOISE_STD_M = 0.02
NOISE_SAMPLES = 4000  # std estimate within ~1.1 % (1 sigma); the test allows 6 %
NOISE_RTOL = 0.06


def collect(env, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step with random actions; return achieved goals, desired goals, rewards, is_success (one row a step)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    achieved, desired, rewards, success = [], [], [], []
    for _ in range(n):
        obs, reward, _, truncated, info = env.step(rng.uniform(-1, 1, size=env.action_space.shape))
        achieved.append(obs["achieved_goal"])
        desired.append(obs["desired_goal"])
        rewards.append(reward)
        success.append(info["is_success"])
        if truncated:
            env.reset()
    return np.array(achieved), np.array(desired), np.array(rewards), np.array(success)


@pytest.mark.parametrize("reward_type", ["sparse", "dense"])
@pytest.mark.parametrize(
    "make_env",
    [
        lambda r: PointReachEnv(delay=2, obs_noise_std_m=NOISE_STD_M, reward_type=r, goal_range_m=0.05),
        lambda r: DelayedFetchReachEnv(delay=2, obs_noise_std_m=NOISE_STD_M, reward_type=r, goal_range_m=0.05),
    ],
    ids=["point", "fetch"],
)
def test_vectorized_compute_reward_equals_step_reward(make_env, reward_type: str) -> None:
    env = make_env(reward_type)
    achieved, desired, rewards, success = collect(env, N_TRANSITIONS, seed=8)
    batch = env.compute_reward(achieved, desired, [{}] * N_TRANSITIONS)
    assert batch.shape == (N_TRANSITIONS,)
    assert batch.dtype == np.float32
    # Exact equality: the reward of every step is reproduced bit for bit from the stored goals.
    np.testing.assert_array_equal(batch, rewards.astype(np.float32))
    if reward_type == "sparse":
        assert set(np.unique(batch)) <= {-1.0, 0.0}
        assert 0 < success.sum() < N_TRANSITIONS, "the sample should contain successes and failures"
        np.testing.assert_array_equal(batch == 0.0, success == 1.0)
    # Hindsight relabelling: a batch of (N, G) goals broadcasts the same way.
    relabel = env.compute_reward(achieved[:, None, :], desired[None, :5, :], None)
    assert relabel.shape == (N_TRANSITIONS, 5)
    np.testing.assert_array_equal(relabel[:, 0], env.compute_reward(achieved, desired[0], None))


def test_delay_randomization_covers_the_inclusive_range() -> None:
    env = PointReachEnv(delay_range=(2, 5))
    counts = np.bincount([env.reset(seed=s)[1]["delay"] for s in range(400)], minlength=6)
    # 400 draws over {2, 3, 4, 5}: ~100 each, never below 2 or above 5.
    assert counts[:2].sum() == 0
    assert np.all(counts[2:6] > 60), counts


def test_fixed_delay_range_never_varies() -> None:
    env = PointReachEnv(delay_range=(3, 3))
    assert {env.reset(seed=s)[1]["delay"] for s in range(20)} == {3}


def test_observation_noise_has_the_configured_std() -> None:
    env = PointReachEnv(delay=0, obs_noise_std_m=NOISE_STD_M)
    samples = np.array([env.reset(seed=s)[0]["achieved_goal"] for s in range(NOISE_SAMPLES)])
    # The true start is the origin; what is observed is pure noise.
    np.testing.assert_allclose(samples.std(axis=0), NOISE_STD_M, rtol=NOISE_RTOL)
    np.testing.assert_allclose(samples.mean(axis=0), 0.0, atol=4 * NOISE_STD_M / np.sqrt(NOISE_SAMPLES))


def test_fetch_noise_per_axis_and_shared_by_observation_and_achieved_goal() -> None:
    std = (0.01, 0.0, 0.03)
    env = DelayedFetchReachEnv(delay=0, obs_noise_std_m=std)
    env.reset(seed=0)
    errors = []
    for _ in range(1500):
        obs, *_ = env.step(np.zeros(4))
        true_pos = env._physics_state()[:3]
        # the same draw in the observation's grip_pos and in achieved_goal
        np.testing.assert_array_equal(obs["observation"][:3], obs["achieved_goal"])
        # only the position is noisy: gripper state and velocities are exact
        np.testing.assert_array_equal(obs["observation"][3:], env._physics_state()[3:])
        errors.append(obs["achieved_goal"] - true_pos)
    errors = np.array(errors)
    # 1500 samples: std estimate within ~1.8 % (1 sigma); allow 10 %.
    np.testing.assert_allclose(errors.std(axis=0), std, rtol=0.10)
    assert np.all(errors[:, 1] == 0.0)

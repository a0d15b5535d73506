"""The optimized step path computes exactly what the reference functions compute, and still checks its input."""

from __future__ import annotations

import numpy as np
import pytest

from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.delayed_goal_env import goal_distance
from envs.point_reach import PointReachEnv


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_goal_distance_is_bit_identical_to_linalg_norm(dtype) -> None:
    rng = np.random.default_rng(0)
    a = (rng.normal(size=(64, 5, 3)) * 10).astype(dtype)
    d = (rng.normal(size=(5, 3)) * 10).astype(dtype)
    expected = np.linalg.norm(a - d, axis=-1)
    got = goal_distance(a, d)
    assert got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes()
    assert goal_distance(a[0, 0], d[0]).tobytes() == np.linalg.norm(a[0, 0] - d[0], axis=-1).tobytes()


def test_fetch_cached_state_read_equals_fetch_reach_get_obs() -> None:
    """The cached-index state read must match gymnasium-robotics' own observation at every step."""
    env = DelayedFetchReachEnv(delay=1, obs_noise_std_m=0.0)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(60):
        env.step(rng.uniform(-1, 1, size=4))
        reference = np.asarray(env._fetch._get_obs()["observation"], dtype=np.float64)
        assert env._physics_state().tobytes() == reference.tobytes()
    env.close()


def test_step_clips_exactly_like_the_contract() -> None:
    env = PointReachEnv(delay=1)
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    for dtype in (np.float64, np.float32):
        for _ in range(50):
            action = (rng.normal(size=3) * 2).astype(dtype)
            obs, *_ = env.step(action)
            expected = env.contract.clip_action(np.asarray(action, dtype=np.float64))
            assert obs["observation"][6:].tobytes() == expected.tobytes()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_step_rejects_non_finite_actions(bad: float) -> None:
    env = PointReachEnv(delay=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="NaN or inf"):
        env.step(np.array([0.0, bad, 0.0]))


def test_step_accepts_huge_finite_actions_whose_sum_overflows() -> None:
    env = PointReachEnv(delay=0)
    env.reset(seed=0)
    with np.errstate(over="ignore"):
        obs, *_ = env.step(np.array([1e308, 1e308, -1e308]))  # sum overflows to inf; every entry is finite
    np.testing.assert_array_equal(obs["observation"][3:6], [0.05, 0.05, -0.05])  # clipped to +-1 x 0.05 m


@pytest.mark.parametrize("shape", [(2,), (4,), (1, 3), ()])
def test_step_rejects_wrong_action_shapes(shape: tuple[int, ...]) -> None:
    env = PointReachEnv(delay=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must have shape \(3,\)"):
        env.step(np.zeros(shape))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delay_range": (3, 1)}, "delay_range must satisfy"),
        ({"delay_range": (0, 9)}, "delay_range must satisfy"),
        ({"delay": -1}, "delay_range must satisfy"),
        ({"distance_threshold": 0.0}, "distance_threshold must be > 0"),
        ({"max_episode_steps": 0}, "max_episode_steps must be >= 1"),
        ({"reward_type": "shaped"}, "reward_type must be 'sparse' or 'dense'"),
        ({"obs_noise_std_m": -0.01}, "obs_noise_std_m must be finite and >= 0"),
        ({"obs_noise_std_m": float("nan")}, "obs_noise_std_m must be finite and >= 0"),
        ({"goal_range_m": 0.5}, "goal_range_m must be in"),
    ],
)
@pytest.mark.parametrize("make_env", [PointReachEnv, DelayedFetchReachEnv], ids=["point", "fetch"])
def test_constructor_rejects_bad_arguments(make_env, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_env(**kwargs)


def test_point_restore_rejects_a_state_of_the_wrong_size() -> None:
    env = PointReachEnv(delay=1)
    env.reset(seed=0)
    snap = env.snapshot()
    snap.physics = np.zeros(5)
    with pytest.raises(ValueError, match="point state must have 6 values"):
        env.reset(options={"snapshot": snap})

"""Snapshot/restore: the same actions after a restore give bit-identical observations, rewards and infos."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.delayed_goal_env import EnvSnapshot
from envs.point_reach import PointReachEnv

REPLAY_STEPS = 50
WARMUP_STEPS = 7  # snapshot mid-episode, with commands pending


def make_point() -> PointReachEnv:
    return PointReachEnv(delay_range=(1, 3), obs_noise_std_m=0.01, max_episode_steps=40)


def make_fetch() -> DelayedFetchReachEnv:
    return DelayedFetchReachEnv(delay_range=(1, 3), obs_noise_std_m=(0.01, 0.0, 0.02), max_episode_steps=40)


MAKERS = pytest.mark.parametrize("make_env", [make_point, make_fetch], ids=["point", "fetch"])


def rollout(env, actions: np.ndarray) -> list:
    """Step through ``actions``, resetting on truncation; return every step's (obs, reward, term, trunc, info)."""
    out = []
    for action in actions:
        step = env.step(action)
        out.append(step)
        if step[2] or step[3]:
            env.reset()
    return out


def assert_identical(a: list, b: list) -> None:
    assert len(a) == len(b)
    for t, (sa, sb) in enumerate(zip(a, b, strict=True)):
        for key in sa[0]:
            assert sa[0][key].tobytes() == sb[0][key].tobytes(), f"step {t}: {key} differs"
        assert sa[1:4] == sb[1:4], f"step {t}: reward/terminated/truncated differ"
        assert sa[4] == sb[4], f"step {t}: info differs"


def actions_for(env, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, *env.action_space.shape))


@MAKERS
def test_restore_replays_bit_identically(make_env) -> None:
    env = make_env()
    env.reset(seed=5)
    last_obs = rollout(env, actions_for(env, WARMUP_STEPS, 0))[-1][0]
    snap = env.snapshot()
    actions = actions_for(env, REPLAY_STEPS, 1)  # crosses the 40-step truncation: the reset is replayed too
    first = rollout(env, actions)
    obs, info = env.reset(options={"snapshot": snap})
    assert info["delay"] == snap.delay
    # The restored env returns the observation it had returned when the snapshot was taken (noise included).
    for key in obs:
        assert obs[key].tobytes() == last_obs[key].tobytes()
    second = rollout(env, actions)
    assert_identical(first, second)
    assert any(step[3] for step in first), "the replay should cross an episode boundary"


@MAKERS
def test_restore_into_a_fresh_instance_after_pickling(make_env) -> None:
    """What SubprocVecEnv does: the snapshot travels through pickle into another env object."""
    env = make_env()
    env.reset(seed=11)
    rollout(env, actions_for(env, WARMUP_STEPS, 2))
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    actions = actions_for(env, REPLAY_STEPS, 3)
    first = rollout(env, actions)
    other = make_env()
    other.reset(seed=999)  # a different history, goal and RNG state, all overwritten by the snapshot
    rollout(other, actions_for(other, 3, 4))
    other.reset(options={"snapshot": snap})
    assert_identical(first, rollout(other, actions))


def mid_episode(make_env, seed: int, action_seed: int):
    """A fresh env after WARMUP_STEPS random steps of episode ``seed`` (commands pending), and its snapshot."""
    env = make_env()
    env.reset(seed=seed)
    rollout(env, actions_for(env, WARMUP_STEPS, action_seed))
    return env, env.snapshot()


@MAKERS
def test_snapshot_is_independent_of_later_steps(make_env) -> None:
    env, snap = mid_episode(make_env, seed=2, action_seed=5)
    copy = pickle.loads(pickle.dumps(snap))
    rollout(env, actions_for(env, 10, 6))
    assert_same_snapshot(snap, copy)


def assert_same_snapshot(a: EnvSnapshot, b: EnvSnapshot) -> None:
    for name in ("physics", "goal", "history"):
        assert np.asarray(getattr(a, name)).tobytes() == np.asarray(getattr(b, name)).tobytes(), f"{name} changed"
    assert (a.delay, a.elapsed_steps, a.rng_state) == (b.delay, b.elapsed_steps, b.rng_state)
    assert a.observation is not None and b.observation is not None
    for key in a.observation:
        assert a.observation[key].tobytes() == b.observation[key].tobytes(), f"observation[{key!r}] changed"


def test_different_seeds_give_different_goals() -> None:
    env = make_point()
    goals = {env.reset(seed=s)[0]["desired_goal"].tobytes() for s in range(5)}
    assert len(goals) == 5


def test_restore_rejects_something_that_is_not_a_snapshot() -> None:
    env = make_point()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="EnvSnapshot"):
        env.reset(options={"snapshot": {"goal": [0, 0, 0]}})


def test_restore_rejects_a_snapshot_of_another_delay_layout() -> None:
    env = PointReachEnv(delay=3)
    env.reset(seed=0)
    snap = env.snapshot()
    assert isinstance(snap, EnvSnapshot)
    with pytest.raises(ValueError, match="history"):
        PointReachEnv(delay=2).reset(options={"snapshot": snap})


@MAKERS
def test_a_mid_episode_snapshot_restored_as_a_new_episode_gets_the_whole_length(make_env) -> None:
    env, snapshot = mid_episode(make_env, seed=3, action_seed=3)
    continued, _ = env.reset(options={"snapshot": snapshot})
    assert env.elapsed_steps == WARMUP_STEPS
    restarted, _ = env.reset(options={"snapshot": snapshot, "new_episode": True})
    assert env.elapsed_steps == 0
    for key in continued:
        np.testing.assert_array_equal(restarted[key], continued[key])

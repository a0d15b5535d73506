"""envs.with_snapshots on gymnasium MuJoCo envs: a restore replays 50 random steps bit for bit.

Every Fetch task of gymnasium-robotics (v4) and two gymnasium MuJoCo Box envs (Reacher-v5, which never terminates,
and InvertedPendulum-v5, which terminates early), plain and behind the delay wrapper (the registered delayed Fetch
ids, with a per-episode random delay). The replay starts mid-episode with commands in flight and crosses the end of
the episode, so the reset that follows (goal, object and delay draws from the restored RNG) is replayed too.
"""

from __future__ import annotations

import pickle

import gymnasium as gym
import gymnasium_robotics
import mujoco
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import envs
from envs.action_delay import ActionDelay
from envs.snapshots import MujocoSnapshot, with_snapshots
from robot_grpo.group_reset import group_reset

gym.register_envs(gymnasium_robotics)

REPLAY_STEPS = 50
WARMUP_STEPS = 7  # snapshot mid-episode (with commands in flight behind the delay wrapper)
EPISODE_STEPS = 40  # shorter than the replay: the end of the episode and the next reset are replayed
FETCH_TASKS = ["FetchReach-v4", "FetchPush-v4", "FetchPickAndPlace-v4", "FetchSlide-v4"]
BOX_ENVS = ["Reacher-v5", "InvertedPendulum-v5"]
DELAYED_IDS = ["DelayedFetchPush-v0", "DelayedFetchPickAndPlace-v0", "DelayedFetchSlide-v0"]


def plain(env_id: str) -> gym.Env:
    return with_snapshots(gym.make(env_id, max_episode_steps=EPISODE_STEPS))


def delayed(env_id: str) -> gym.Env:
    return gym.make(env_id, delay_range=(1, 3), episode_steps=EPISODE_STEPS)


CASES = [(plain, env_id) for env_id in FETCH_TASKS + BOX_ENVS] + [(delayed, env_id) for env_id in DELAYED_IDS]
IDS = [f"{make.__name__}-{env_id}" for make, env_id in CASES]


def rollout(env: gym.Env, actions: np.ndarray) -> list:
    out = []
    for action in actions:
        step = env.step(action)
        out.append(step)
        if step[2] or step[3]:
            out.append(env.reset())
    return out


def assert_identical(a: list, b: list) -> None:
    assert len(a) == len(b)
    for t, (sa, sb) in enumerate(zip(a, b, strict=True)):
        obs_a, obs_b = sa[0], sb[0]
        if isinstance(obs_a, dict):
            for key in obs_a:
                assert obs_a[key].tobytes() == obs_b[key].tobytes(), f"step {t}: {key} differs"
        else:
            assert obs_a.tobytes() == obs_b.tobytes(), f"step {t}: observation differs"
        assert repr(sa[1:]) == repr(sb[1:]), f"step {t}: reward/terminated/truncated/info differ"


def actions_for(env: gym.Env, n: int, seed: int) -> np.ndarray:
    space = env.action_space
    return np.random.default_rng(seed).uniform(space.low, space.high, size=(n, *space.shape)).astype(space.dtype)


@pytest.mark.parametrize(("make", "env_id"), CASES, ids=IDS)
def test_restore_replays_50_random_steps_bit_identically(make, env_id):
    env = make(env_id)
    env.reset(seed=3)
    rollout(env, actions_for(env, WARMUP_STEPS, 0))
    snapshot = env.get_wrapper_attr("snapshot")()
    actions = actions_for(env, REPLAY_STEPS, 1)
    first = rollout(env, actions)
    assert any(step[2] or step[3] for step in first if len(step) == 5)  # the replay crosses an episode end
    restored_obs, _ = env.reset(options={"snapshot": snapshot})
    assert_identical(rollout(env, actions), first)
    # a pickled snapshot (SubprocVecEnv) restores another env of the same kind alike
    other = make(env_id)
    other.reset(seed=99)
    other_obs, _ = other.reset(options={"snapshot": pickle.loads(pickle.dumps(snapshot))})
    assert repr(other_obs) == repr(restored_obs)
    assert_identical(rollout(other, actions), first)


@pytest.mark.parametrize("env_id", FETCH_TASKS + BOX_ENVS)
def test_a_snapshot_after_reset_does_not_change_what_follows(env_id):
    """Group resets snapshot right after a reset: that must leave the leader's own episode as it would have been."""
    watched, untouched = plain(env_id), plain(env_id)
    watched.reset(seed=5)
    untouched.reset(seed=5)
    base = watched.unwrapped
    before = np.empty(mujoco.mj_stateSize(base.model, mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_getState(base.model, base.data, before, mujoco.mjtState.mjSTATE_INTEGRATION)
    watched.get_wrapper_attr("snapshot")()
    after = np.empty_like(before)
    mujoco.mj_getState(base.model, base.data, after, mujoco.mjtState.mjSTATE_INTEGRATION)
    assert before.tobytes() == after.tobytes()
    actions = actions_for(watched, REPLAY_STEPS, 2)
    assert_identical(rollout(watched, actions), rollout(untouched, actions))


def test_snapshot_holds_the_goal_rng_delay_line_and_step_count():
    env = delayed("DelayedFetchPush-v0")
    env.reset(seed=0)
    rollout(env, actions_for(env, WARMUP_STEPS, 0))
    snapshot = env.get_wrapper_attr("snapshot")()
    assert isinstance(snapshot, MujocoSnapshot)
    np.testing.assert_array_equal(snapshot.task["goal"], env.unwrapped.goal)
    history, delay = snapshot.wrappers[0]  # ActionDelay, then the task's TimeLimit
    assert delay == env.get_wrapper_attr("delay") and history.shape == (3, 4)
    assert snapshot.wrappers[1] == WARMUP_STEPS
    assert env.get_wrapper_attr("max_episode_steps") == EPISODE_STEPS


def test_misuse_is_refused_with_a_fix():
    with pytest.raises(ValueError, match="MuJoCo env"):
        with_snapshots(gym.make("Pendulum-v1"))
    with pytest.raises(ValueError, match="inside with_snapshots"):
        ActionDelay(with_snapshots(gym.make("FetchReach-v4")), delay=2)
    env = plain("FetchReach-v4")
    with pytest.raises(RuntimeError, match="reset the env"):
        env.snapshot()
    env.reset(seed=0)
    other = plain("FetchPush-v4")
    other.reset(seed=0)
    with pytest.raises(ValueError, match="different env"):
        env.reset(options={"snapshot": other.snapshot()})
    with pytest.raises(TypeError, match="MujocoSnapshot"):
        env.reset(options={"snapshot": {"qpos": 0}})


def test_group_reset_on_fetch_reach_built_with_make_vec_env():
    group_size = 2
    vec = make_vec_env("FetchReach-v4", n_envs=2 * group_size, seed=0, wrapper_class=envs.with_snapshots)
    obs = group_reset(vec, group_size)
    for key in ("observation", "desired_goal"):
        np.testing.assert_array_equal(obs[key][0], obs[key][1])
        np.testing.assert_array_equal(obs[key][2], obs[key][3])
    assert not np.array_equal(obs["desired_goal"][0], obs["desired_goal"][2])


def steps_until_truncated(env: gym.Env, limit: int) -> int:
    """Hold-still steps until the env truncates (at most ``limit``)."""
    hold = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
    for n in range(1, limit + 1):
        _, _, terminated, truncated, _ = env.step(hold)
        if terminated or truncated:
            return n
    return limit


@pytest.mark.parametrize(("make", "env_id"), [(plain, "FetchPush-v4"), (delayed, "DelayedFetchPush-v0")])
def test_a_mid_episode_snapshot_restored_as_a_new_episode_gets_the_whole_length(make, env_id):
    """``new_episode``: the state (block, gripper, goal, delay line) is the snapshot's, the step count starts at 0;
    without it the restore continues the episode (and ends WARMUP_STEPS earlier)."""
    env = make(env_id)
    env.reset(seed=0)
    rollout(env, actions_for(env, WARMUP_STEPS, 0))
    snapshot = env.get_wrapper_attr("snapshot")()
    continued, _ = env.reset(options={"snapshot": snapshot})
    assert steps_until_truncated(env, 2 * EPISODE_STEPS) == EPISODE_STEPS - WARMUP_STEPS
    restarted, _ = env.reset(options={"snapshot": snapshot, "new_episode": True})
    for key in ("observation", "achieved_goal", "desired_goal"):
        np.testing.assert_array_equal(restarted[key], continued[key])
    assert steps_until_truncated(env, 2 * EPISODE_STEPS) == EPISODE_STEPS

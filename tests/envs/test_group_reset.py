"""Group reset across processes: every member of a group starts from its leader's snapshot.

SB3's SubprocVecEnv runs each env in its own process, so the snapshots cross process boundaries through pickle;
the test checks, over 50 steps, that members fed identical actions produce bit-identical observations and
rewards, that different groups differ, and that a snapshot taken in a worker replays bit for bit in this process.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.point_reach import PointReachEnv
from robot_grpo.group_reset import group_reset

GROUP_SIZE = 2
N_GROUPS = 2
N_ENVS = GROUP_SIZE * N_GROUPS
N_STEPS = 50
EPISODE_STEPS = 100  # longer than N_STEPS: no auto-reset inside the window
# fork: the workers inherit the imported modules (seconds faster than spawn); snapshots still cross the pipe
START_METHOD = "fork"

MAKERS = {
    "point": functools.partial(
        PointReachEnv, delay_range=(1, 3), obs_noise_std_m=0.01, max_episode_steps=EPISODE_STEPS
    ),
    "fetch": functools.partial(
        DelayedFetchReachEnv, delay_range=(1, 3), obs_noise_std_m=0.01, max_episode_steps=EPISODE_STEPS
    ),
}


def group_actions(seed: int) -> np.ndarray:
    """(N_STEPS, N_ENVS, 4) actions; members of one group get the same actions, groups get different ones."""
    per_group = np.random.default_rng(seed).uniform(-1, 1, size=(N_STEPS, N_GROUPS, 4))
    return np.repeat(per_group, GROUP_SIZE, axis=1)


def run_group(vec_env, seed: int) -> tuple[list[dict[str, np.ndarray]], np.ndarray, list]:
    obs = group_reset(vec_env, GROUP_SIZE, seed=seed)
    snapshots = vec_env.env_method("snapshot")
    dim = vec_env.action_space.shape[0]
    all_obs, rewards = [obs], []
    for actions in group_actions(seed)[:, :, :dim]:
        obs, reward, done, _ = vec_env.step(actions)
        assert not done.any()
        all_obs.append(obs)
        rewards.append(reward)
    return all_obs, np.array(rewards), snapshots


def assert_group_structure(all_obs: list[dict[str, np.ndarray]], rewards: np.ndarray) -> None:
    for step, obs in enumerate(all_obs):
        for key, value in obs.items():
            for g in range(N_GROUPS):
                block = value[g * GROUP_SIZE : (g + 1) * GROUP_SIZE]
                for member in block[1:]:
                    assert member.tobytes() == block[0].tobytes(), f"step {step}: {key} differs inside group {g}"
        if step > 0:
            # Different groups got different actions (and started from different goals): they must differ.
            assert obs["observation"][0].tobytes() != obs["observation"][GROUP_SIZE].tobytes()
    assert all_obs[0]["desired_goal"][0].tobytes() != all_obs[0]["desired_goal"][GROUP_SIZE].tobytes()
    grouped = rewards.reshape(N_STEPS, N_GROUPS, GROUP_SIZE)
    assert np.array_equal(grouped, np.repeat(grouped[:, :, :1], GROUP_SIZE, axis=2))


@pytest.mark.parametrize("name", ["point", "fetch"])
def test_subproc_group_reset_is_bit_identical_inside_groups(name: str) -> None:
    vec_env = SubprocVecEnv([MAKERS[name]] * N_ENVS, start_method=START_METHOD)
    try:
        all_obs, rewards, snapshots = run_group(vec_env, seed=21)
    finally:
        vec_env.close()
    assert_group_structure(all_obs, rewards)

    # A snapshot taken in a worker replays, in this process, the worker's 50 steps bit for bit.
    local = MAKERS[name]()
    obs, _ = local.reset(options={"snapshot": snapshots[GROUP_SIZE]})
    for key in obs:
        assert obs[key].tobytes() == all_obs[0][key][GROUP_SIZE].tobytes()
    for t, actions in enumerate(group_actions(21)[:, GROUP_SIZE, : local.action_space.shape[0]]):
        obs, reward, *_ = local.step(actions)
        for key in obs:
            assert obs[key].tobytes() == all_obs[t + 1][key][GROUP_SIZE].tobytes(), f"step {t}: {key}"
        assert np.float32(reward) == rewards[t, GROUP_SIZE]


def test_dummy_and_subproc_group_reset_agree() -> None:
    """Same seed, same actions: the in-process and the multi-process VecEnv produce the same bytes."""
    dummy = DummyVecEnv([MAKERS["point"]] * N_ENVS)
    subproc = SubprocVecEnv([MAKERS["point"]] * N_ENVS, start_method=START_METHOD)
    try:
        obs_d, rew_d, _ = run_group(dummy, seed=4)
        obs_s, rew_s, _ = run_group(subproc, seed=4)
    finally:
        subproc.close()
    assert_group_structure(obs_d, rew_d)
    assert np.array_equal(rew_d, rew_s)
    for a, b in zip(obs_d, obs_s, strict=True):
        for key in a:
            assert a[key].tobytes() == b[key].tobytes()

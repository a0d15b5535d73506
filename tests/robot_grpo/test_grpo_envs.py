"""GRPO on MuJoCo envs beyond the robot task (smoke tests, tiny budgets): DelayedFetchPush-v0, a FetchReach-v4
built with SB3's make_vec_env and wrapped with envs.with_snapshots, and a plain Box env (Reacher-v5)."""

from __future__ import annotations

import gymnasium as gym
import gymnasium_robotics
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env

import envs
from robot_grpo import GRPO

gym.register_envs(gymnasium_robotics)

G, N_GROUPS, EPISODE_STEPS = 2, 2, 50
UPDATES = 2
TINY = {"group_size": G, "n_groups": N_GROUPS, "batch_size": 256, "n_epochs": 1, "policy_kwargs": {"net_arch": [16]}}


def trains(model: GRPO) -> None:
    before = {k: v.detach().clone() for k, v in model.policy.named_parameters()}
    model.learn(UPDATES * G * N_GROUPS * EPISODE_STEPS)
    assert model.n_steps == EPISODE_STEPS  # read from the wrapper's TimeLimit
    assert model.num_timesteps == UPDATES * G * N_GROUPS * EPISODE_STEPS
    assert any(not th.equal(v, before[k]) for k, v in model.policy.named_parameters())
    assert np.isfinite(model.logger.name_to_value["train/loss"])


def test_grpo_trains_on_delayed_fetch_push():
    env = make_vec_env("DelayedFetchPush-v0", n_envs=G * N_GROUPS, seed=0)
    model = GRPO("MultiInputPolicy", env, seed=0, **TINY)
    trains(model)
    assert model.rollout_buffer.n_samples > G * N_GROUPS * EPISODE_STEPS  # hindsight added relabelled rows


def test_restarted_push_groups_run_the_whole_episode_from_a_mid_episode_state():
    """The task's step count is part of its snapshot: a group restarted from a state after k steps is reset as a new
    episode (``new_episode``), so it still runs EPISODE_STEPS steps (before: its episodes ended k steps early and the
    rollout stopped with 'episodes must all end exactly at the time limit')."""
    env = make_vec_env("DelayedFetchPush-v0", n_envs=G * N_GROUPS, seed=0)
    model = GRPO("MultiInputPolicy", env, seed=0, restart_fraction=0.5, **TINY)
    trains(model)
    assert model._rollout_stats["rollout/restarted_groups"] == 1.0


def test_the_reaching_term_an_env_reports_reaches_the_buffer_and_its_hindsight_copies():
    env = make_vec_env("DelayedFetchPush-v0", n_envs=G * N_GROUPS, seed=0, env_kwargs={"approach_coef": 5.0})
    model = GRPO("MultiInputPolicy", env, seed=0, **TINY)
    model.learn(G * N_GROUPS * EPISODE_STEPS)
    buffer = model.rollout_buffer
    assert np.all(buffer.reward_offsets >= 0) and np.any(buffer.reward_offsets > 0)  # 5 per metre of new approach
    np.testing.assert_allclose(buffer.rewards - buffer.reward_offsets, -1.0, atol=1e-5)  # the sparse part: no push
    copies = buffer._relabel(model.policy, model._compute_reward, np.random.default_rng(0), None)
    sparse = copies.rewards - buffer._grouped(buffer.reward_offsets)[None]
    assert np.all(np.isclose(sparse, 0.0, atol=1e-5) | np.isclose(sparse, -1.0, atol=1e-5))


@pytest.mark.parametrize("delay", [0, 2])
def test_grpo_trains_on_fetch_reach_wrapped_with_snapshots(delay):
    def wrap(env: gym.Env) -> gym.Env:
        return envs.with_snapshots(envs.ActionDelay(env, delay=delay) if delay else env)

    env = make_vec_env("FetchReach-v4", n_envs=G * N_GROUPS, seed=0, wrapper_class=wrap)
    trains(GRPO("MultiInputPolicy", env, seed=0, **TINY))


def test_grpo_trains_on_a_box_mujoco_env():
    from robot_grpo import GroupRolloutBuffer

    env = make_vec_env("Reacher-v5", n_envs=G * N_GROUPS, seed=0, wrapper_class=envs.with_snapshots)
    model = GRPO("MlpPolicy", env, seed=0, **TINY)
    assert isinstance(model.rollout_buffer, GroupRolloutBuffer)  # no goals: plain GRPO
    trains(model)


def test_the_readme_recipe_for_your_own_mujoco_robot():
    """README, "bringing your own MuJoCo robot": wrap (delay inside, snapshots outside), register, train."""

    def make_my_arm(delay: int = 2, episode_steps: int = EPISODE_STEPS):
        env = gym.make("FetchReach-v4", max_episode_steps=episode_steps)  # stands in for the user's MuJoCo env
        return envs.with_snapshots(envs.ActionDelay(env, delay=delay))

    if "DelayedMyArmReach-v0" not in gym.registry:
        gym.register("DelayedMyArmReach-v0", entry_point=make_my_arm)
    env = make_vec_env("DelayedMyArmReach-v0", n_envs=G * N_GROUPS, seed=0)
    model = GRPO("MultiInputPolicy", env, seed=0, **TINY)
    assert model.observation_space["observation"].shape == (10 + 2 * 4,)  # FetchReach's 10 + 2 commands in flight
    trains(model)

"""GroupRunner (no Ray): members share one start, and a group's result does not depend on the runner's past."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env

import envs  # noqa: F401  (registers the ids)
from deploy.export.rollouts import make_env
from envs.point_reach import PointReachEnv
from robot_grpo import GRPO
from robot_grpo.scale.group_runner import GroupRunner
from robot_grpo.scale.streams import group_noise

G = 3
POINT = ("PointReach-v0", {"max_episode_steps": 6})
FETCH = ("DelayedFetchReach-v0", {"delay": 2})


class CarryOverPointReach(PointReachEnv):
    """A point mass whose reset leaves it where the last episode ended (an incomplete reset)."""

    def _physics_reset(self) -> None:
        self._point_vel[:] = 0.0


def policy_for(env_id: str, env_kwargs: dict, seed: int = 0):
    vec_env = make_vec_env(lambda: make_env(env_id, env_kwargs), n_envs=G)
    model = GRPO("MultiInputPolicy", vec_env, group_size=G, n_groups=1, seed=seed, policy_kwargs={"net_arch": [8]})
    model.policy.set_training_mode(False)
    return model.policy, model.n_steps


def assert_same(a, b):
    for x, y in zip(a[1:-1], b[1:-1], strict=True):  # every array; not compute_s
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(("env_id", "env_kwargs"), [POINT, FETCH])
def test_a_group_is_the_same_on_a_fresh_runner_and_on_one_with_a_past(env_id, env_kwargs):
    policy, n_steps = policy_for(env_id, env_kwargs)
    factory = functools.partial(make_env, env_id, env_kwargs)
    used, fresh = GroupRunner(factory, G), GroupRunner(factory, G)
    used.run(policy, seed=5, update=0, group=0, n_steps=n_steps)  # leaves MuJoCo warm start, mocap, RNG behind
    used.run(policy, seed=5, update=0, group=1, n_steps=n_steps)
    assert_same(used.run(policy, 5, 1, 2, n_steps), fresh.run(policy, 5, 1, 2, n_steps))


def test_an_incomplete_reset_does_not_leak_between_groups():
    policy, n_steps = policy_for(*POINT)
    factory = functools.partial(CarryOverPointReach, max_episode_steps=6)
    used, fresh = GroupRunner(factory, G), GroupRunner(factory, G)
    used.run(policy, seed=5, update=0, group=0, n_steps=n_steps)  # the point ends away from the start
    assert_same(used.run(policy, 5, 0, 1, n_steps), fresh.run(policy, 5, 0, 1, n_steps))


def test_members_share_the_start_and_act_with_their_own_noise():
    policy, n_steps = policy_for(*POINT)
    runner = GroupRunner(functools.partial(make_env, *POINT), G)
    out = runner.run(policy, seed=1, update=0, group=0, n_steps=n_steps)
    assert out.observations.shape == (n_steps, G, policy.obs_dim) and out.rewards.shape == (n_steps, G)
    np.testing.assert_array_equal(out.observations[0], np.repeat(out.observations[0][:1], G, axis=0))
    # first action = mean(start obs) + noise * std: the members differ only by their noise
    noise = th.as_tensor(group_noise(1, 0, 0, G, n_steps, policy.action_dim)[0])
    with th.no_grad():
        mean, log_std = policy.distribution_params(th.as_tensor(out.observations[0]))
        expected = (mean + noise * th.exp(log_std)).numpy()
    np.testing.assert_array_equal(out.actions[0], expected)
    assert not np.array_equal(out.actions[0, 0], out.actions[0, 1])
    assert out.successes.shape == (G,) and out.achieved_next.shape == (n_steps, G, 3)


def test_another_group_starts_elsewhere():
    policy, n_steps = policy_for(*POINT)
    runner = GroupRunner(functools.partial(make_env, *POINT), G)
    a = runner.run(policy, 1, 0, 0, n_steps)
    b = runner.run(policy, 1, 0, 1, n_steps)
    assert not np.array_equal(a.observations[0, 0], b.observations[0, 0])  # another goal


def test_episodes_that_end_before_the_time_limit_are_refused():
    policy, _ = policy_for(*POINT)
    runner = GroupRunner(functools.partial(make_env, *POINT), G)
    with pytest.raises(ValueError, match="time limit"):
        runner.run(policy, 1, 0, 0, n_steps=8)  # the env truncates at 6


def test_the_goal_free_reward_part_an_env_reports_is_returned():
    push = ("DelayedFetchPush-v0", {"approach_coef": 5.0})
    policy, n_steps = policy_for(*push)
    out = GroupRunner(functools.partial(make_env, *push), G).run(policy, 2, 0, 0, n_steps)
    assert out.reward_offsets.shape == (n_steps, G) and np.any(out.reward_offsets > 0)
    np.testing.assert_allclose(out.rewards - out.reward_offsets, -1.0, atol=1e-5)  # the sparse part: no push


def test_an_env_without_snapshots_is_refused_with_the_wrapper_named():
    import gymnasium as gym

    with pytest.raises(ValueError, match="envs.with_snapshots"):
        GroupRunner(lambda: gym.make("Reacher-v5"), G)

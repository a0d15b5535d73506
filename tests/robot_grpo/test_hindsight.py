"""Whole-group hindsight relabelling: goals, rewards from compute_reward, importance weights."""

import math

import numpy as np
import pytest
import torch as th

from envs.point_reach import PointReachEnv
from robot_grpo.buffers import HindsightGroupBuffer
from robot_grpo.hindsight import (
    HindsightConfig,
    distance_penalty,
    importance_weights,
    relabel_rewards,
    sample_group_goals,
)
from robot_grpo.policies import GoalGaussianPolicy

T, N_GROUPS, G, D_GOAL = 5, 2, 4, 3


def _achieved(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.15, 0.15, size=(T, N_GROUPS, G, D_GOAL))


def test_final_goals_come_from_distinct_members_last_step():
    achieved = _achieved()
    goals, horizon = sample_group_goals(achieved, "final", 3, np.random.default_rng(1))
    assert goals.shape == (3, N_GROUPS, D_GOAL) and np.all(horizon == T - 1)
    for g in range(N_GROUPS):
        members = [int(np.flatnonzero(np.all(achieved[T - 1, g] == goals[k, g], axis=-1))[0]) for k in range(3)]
        assert len(set(members)) == 3  # drawn without replacement


@pytest.mark.parametrize("strategy", ["future", "episode"])
def test_future_and_episode_goals_were_achieved_in_the_group(strategy):
    achieved = _achieved()
    goals, horizon = sample_group_goals(achieved, strategy, 6, np.random.default_rng(2))
    for k in range(6):
        for g in range(N_GROUPS):
            hits = np.argwhere(np.all(achieved[:, g] == goals[k, g], axis=-1))  # (step, member) pairs
            assert len(hits) >= 1
            if strategy == "future":
                assert horizon[k, g] == hits[0][0]  # only the steps up to the one that reached g' are kept
            else:
                assert horizon[k, g] == T - 1


def test_relabelled_rewards_equal_compute_reward():
    env = PointReachEnv()
    achieved = _achieved()
    goals, _ = sample_group_goals(achieved, "episode", 3, np.random.default_rng(3))
    goals[0, 0] = achieved[2, 0, 1]  # make sure some rewards are successes (0) and some failures (-1)
    rewards = relabel_rewards(env.compute_reward, achieved, goals)
    assert rewards.shape == (3, T, N_GROUPS, G)
    for k, t, g, i in np.ndindex(rewards.shape):
        assert rewards[k, t, g, i] == env.compute_reward(achieved[t, g, i], goals[k, g], None)
    assert (rewards == 0).any() and (rewards == -1).any()


def test_importance_weight_truncation_and_self_normalization_arithmetic():
    # K=1, T=2, one group of 2 members. log-ratios at t=0: log 2, log 0.5; at t=1: log 0.25, log 0.25.
    log_orig = np.zeros((2, 1, 2))
    log_rel = np.log(np.array([[[[2.0, 0.5]], [[0.25, 0.25]]]]))
    mask = np.ones((1, 2, 1, 1), dtype=bool)
    # truncated at 1: t=0 -> [min(2, 1), 0.5] = [1, 0.5]; t=1 -> [0.25, 0.25]
    w = importance_weights(log_rel, log_orig, mask, is_clip=1.0, self_normalize=False)
    np.testing.assert_allclose(w[0, :, 0], [[1.0, 0.5], [0.25, 0.25]], rtol=1e-6)
    # self-normalized per step: t=0 mean 0.75 -> [1.333333, 0.666667]; t=1 mean 0.25 -> [1, 1]
    w = importance_weights(log_rel, log_orig, mask, is_clip=1.0, self_normalize=True)
    np.testing.assert_allclose(w[0, :, 0], [[4 / 3, 2 / 3], [1.0, 1.0]], rtol=1e-6)
    # a looser clip keeps the ratio 2 as is
    w = importance_weights(log_rel, log_orig, mask, is_clip=3.0, self_normalize=False)
    assert w[0, 0, 0, 0] == pytest.approx(2.0)
    # masked-out samples (t=1 here) get weight 0 and do not enter the normalization
    mask_t0 = np.array([True, False])[None, :, None, None]
    w = importance_weights(log_rel, log_orig, mask_t0, is_clip=1.0, self_normalize=True)
    np.testing.assert_allclose(w[0, 1], 0.0)
    np.testing.assert_allclose(w[0, 0, 0], [4 / 3, 2 / 3], rtol=1e-6)


def _goal_buffer(**kwargs) -> tuple[HindsightGroupBuffer, GoalGaussianPolicy, PointReachEnv]:
    env = PointReachEnv()
    policy = GoalGaussianPolicy(env.observation_space, env.action_space, lambda _: 3e-4, net_arch=(16,))
    buf = HindsightGroupBuffer(T, env.observation_space, env.action_space, G, N_GROUPS, gamma=0.9, **kwargs)
    return buf, policy, env


def test_is_weight_is_one_when_the_relabelled_goal_is_the_original_goal():
    # every member of a group sits on the group's goal at every step: the "final" goal g' equals g,
    # so pi(a|s,g') / pi(a|s,g) = 1 exactly.
    buf, policy, env = _goal_buffer(n_sampled_goal=2)
    rng = np.random.default_rng(0)
    goals = rng.uniform(-0.1, 0.1, size=(N_GROUPS, D_GOAL))
    env_goal = np.repeat(goals, G, axis=0)  # env e is in group e // G
    for _ in range(T):
        obs = rng.normal(size=(N_GROUPS * G, buf.obs_dim)).astype(np.float32)
        obs[:, -D_GOAL:] = env_goal
        buf.add(obs, rng.normal(size=(N_GROUPS * G, env.action_space.shape[0])), -np.ones(N_GROUPS * G), env_goal)
    copies_stats = buf.compute(policy, policy, env.compute_reward, np.random.default_rng(1))
    samples = buf._samples
    n_orig = T * N_GROUPS * G
    assert th.all(samples.weights == 1.0)
    assert copies_stats["hindsight/weight_mean"] == 1.0
    # the relabelled copies have the same log-probs as the originals (same goal)
    th.testing.assert_close(samples.old_log_prob[n_orig : 2 * n_orig], samples.old_log_prob[:n_orig])


def test_is_correction_off_gives_unit_weights_and_on_gives_truncated_ones():
    for correction in (False, True):
        buf, policy, env = _goal_buffer(n_sampled_goal=2, is_correction=correction)
        rng = np.random.default_rng(0)
        with th.no_grad():
            policy.mean_net[-1].weight.normal_()  # make the goal matter to the policy
        for _ in range(T):
            obs = rng.normal(size=(N_GROUPS * G, buf.obs_dim)).astype(np.float32)
            buf.add(
                obs,
                rng.normal(size=(N_GROUPS * G, env.action_space.shape[0])),
                -np.ones(N_GROUPS * G),
                rng.normal(size=(8, 3)),
            )
        buf.compute(policy, policy, env.compute_reward, np.random.default_rng(1))
        w = buf._samples.weights[T * N_GROUPS * G :]
        if correction:
            assert th.all(w <= 1.0) and th.any(w < 1.0)
        else:
            assert th.all(w == 1.0)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="strategy"):
        HindsightConfig(strategy="random")
    with pytest.raises(ValueError, match="GroupRolloutBuffer"):
        HindsightConfig(n_sampled_goal=0)
    with pytest.raises(ValueError, match="is_clip"):
        HindsightConfig(is_clip=-math.inf)
    for coef in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="distance_coef"):
            HindsightConfig(distance_coef=coef)


def test_distance_penalty_is_minus_coef_times_the_distance():
    achieved = np.array([[0.3, 0.0, 0.4], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(distance_penalty(achieved, np.zeros(3), 2.0), [-1.0, 0.0], rtol=1e-6)


@pytest.mark.parametrize("coef", [0.0, 10.0])
def test_the_distance_term_ranks_members_the_sparse_reward_ties(coef):
    # One goal 0.5 m out for every member; nobody reaches it (sparse reward -1 throughout). Member m ends m * 0.1 m
    # closer: with the distance term the closer members get the larger advantages, without it all are 0.
    buf, policy, env = _goal_buffer(n_sampled_goal=1, distance_coef=coef)
    rng = np.random.default_rng(0)
    goal = np.full((N_GROUPS * G, D_GOAL), 0.5 / math.sqrt(D_GOAL))
    direction = goal / np.linalg.norm(goal, axis=1, keepdims=True)
    progress = np.tile(np.arange(G), N_GROUPS)[:, None] * 0.1  # metres toward the goal by the end, per member
    for t in range(T):
        obs = rng.normal(size=(N_GROUPS * G, buf.obs_dim)).astype(np.float32)
        obs[:, -D_GOAL:] = goal
        buf.add(obs, rng.normal(size=(N_GROUPS * G, 3)), -np.ones(N_GROUPS * G), direction * progress * (t + 1) / T)
    stats = buf.compute(policy, policy, env.compute_reward, np.random.default_rng(1))
    first_step = buf._samples.advantages[: N_GROUPS * G].reshape(N_GROUPS, G)  # original-goal rows, t = 0
    if coef == 0:
        assert th.all(first_step == 0)
    else:
        assert th.all(first_step[:, 1:] > first_step[:, :-1])  # more progress, larger advantage
    # each relabelled "final" goal is reached by the member it came from
    assert stats["hindsight/relabelled_success"] > 0


@pytest.mark.parametrize("skip", [False, True])
def test_goals_the_start_already_satisfies_can_be_skipped(skip):
    # Group 0: members 0-2 never move (their final achieved goal is the start, 0.0), member 3 walks to 0.3 m.
    # Group 1: every member walks to its own far point. "final" with K=4 uses every member's final goal once:
    # 3 of group 0's goals are satisfied at the start, so only the mover's goal is kept for group 0.
    buf, policy, env = _goal_buffer(n_sampled_goal=G, skip_start_goals=skip)
    rng = np.random.default_rng(0)
    start = np.zeros((N_GROUPS * G, D_GOAL))
    start[G:] = 0.05  # group 1 starts elsewhere
    ends = start.copy()
    ends[G - 1] = 0.3  # the mover of group 0
    ends[G:] = 0.05 + np.arange(1, G + 1)[:, None] * 0.1
    for t in range(T):
        obs = rng.normal(size=(N_GROUPS * G, buf.obs_dim)).astype(np.float32)
        obs[:, -2 * D_GOAL : -D_GOAL] = start + (ends - start) * t / T  # achieved goal before the step
        achieved_next = start + (ends - start) * (t + 1) / T
        buf.add(obs, rng.normal(size=(N_GROUPS * G, 3)), -np.ones(N_GROUPS * G), achieved_next)
    stats = buf.compute(policy, policy, env.compute_reward, np.random.default_rng(1))
    n_orig, per_copy = T * N_GROUPS * G, T * G
    kept_copies = (1 + G) if skip else 2 * G
    assert buf.n_samples == n_orig + kept_copies * per_copy
    assert stats["hindsight/kept_goals"] == pytest.approx(kept_copies / (2 * G))
    if skip:  # group 0's only relabelled goal is where the mover ended
        goals = buf._samples.observations[n_orig:, -D_GOAL:].numpy()
        assert np.isclose(goals, 0.3).all(axis=1).any() and not np.isclose(goals, 0.0).all(axis=1).any()


def test_a_group_whose_own_goal_holds_at_the_start_does_not_train_on_it():
    # Group 0's goal is its start (satisfied before any action); group 1's goal is 0.2 m away.
    buf, policy, env = _goal_buffer(n_sampled_goal=1, skip_start_goals=True)
    rng = np.random.default_rng(0)
    start = np.zeros((N_GROUPS * G, D_GOAL))
    goal = np.repeat(np.array([[0.0, 0.0, 0.0], [0.2, 0.2, 0.2]]), G, axis=0)
    for t in range(T):
        obs = rng.normal(size=(N_GROUPS * G, buf.obs_dim)).astype(np.float32)
        obs[:, -2 * D_GOAL : -D_GOAL] = start
        obs[:, -D_GOAL:] = goal
        walked = start + 0.05 * (t + 1) * rng.uniform(0.5, 1.0, size=start.shape)  # every member moves
        buf.add(obs, rng.normal(size=(N_GROUPS * G, 3)), -np.ones(N_GROUPS * G), walked)
    buf.compute(policy, policy, env.compute_reward, np.random.default_rng(1))
    goals = buf._samples.observations[:, -D_GOAL:].numpy()
    original_rows = np.isclose(goals, 0.0).all(axis=1).sum()
    assert original_rows == 0  # group 0's original-goal rows were dropped ...
    assert np.isclose(goals, 0.2).all(axis=1).sum() == T * G  # ... group 1's stayed


def test_relabelled_success_is_read_from_the_goal_reward_alone():
    # Every member walks away from the start; goal-free offsets of +2 per step (a reaching bonus) must not turn the
    # members that missed a relabelled goal into successes in the statistics.
    def success(offset: float) -> float:
        buf, policy, env = _goal_buffer(n_sampled_goal=G)
        rng = np.random.default_rng(0)
        ends = rng.uniform(0.2, 0.4, size=(N_GROUPS * G, D_GOAL))
        for t in range(T):
            obs = rng.normal(size=(N_GROUPS * G, buf.obs_dim)).astype(np.float32)
            offsets = np.full(N_GROUPS * G, offset)
            buf.add(obs, rng.normal(size=(N_GROUPS * G, 3)), offsets - 1.0, ends * (t + 1) / T, reward_offsets=offsets)
        return buf.compute(policy, policy, env.compute_reward, np.random.default_rng(1))["hindsight/relabelled_success"]

    assert success(2.0) == success(0.0) < 1.0

"""Fine-tuning data from logged episodes: transition layout, grouping by target, rows built by the GRPO buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

from robot_grpo.buffers import minibatches
from robot_grpo.finetune_data import (
    build_finetune_samples,
    episode_from_ticks,
    goal_spaces,
    group_by_target,
    hindsight_buffer_options,
)
from robot_grpo.policies import GoalGaussianPolicy

GOAL_DIM, INNER_DIM, ACTION_DIM, THRESHOLD_M = 3, 4, 2, 0.05
OBS_DIM = INNER_DIM + 2 * GOAL_DIM


def sparse_reward(achieved: np.ndarray, desired: np.ndarray, info: object) -> np.ndarray:
    return -(np.linalg.norm(achieved - desired, axis=-1) > THRESHOLD_M).astype(np.float32)


def fake_episode(episode_id: int, goal, n_ticks: int, rng: np.random.Generator, reach: bool = False):
    """A straight-line walk from the origin; with ``reach`` it ends on the goal."""
    goal = np.asarray(goal, dtype=np.float64)
    end = goal if reach else goal + 0.2
    frac = np.linspace(0.0, 1.0, n_ticks)[:, None]
    achieved = frac * end + 0.001 * rng.standard_normal((n_ticks, GOAL_DIM))
    inner = rng.standard_normal((n_ticks, INNER_DIM))
    obs = np.concatenate([inner, achieved, np.broadcast_to(goal, (n_ticks, GOAL_DIM))], axis=1)
    proposed = rng.uniform(-1, 1, size=(n_ticks, ACTION_DIM))
    return episode_from_ticks(episode_id, obs, proposed, GOAL_DIM)


def test_episode_layout_shifts_the_achieved_goal_by_one_tick() -> None:
    # 3 ticks, inner state [t], achieved [t, 0, 0], desired [9, 9, 9]: two transitions.
    obs = np.array([[t, t, 0, 0, 9, 9, 9] for t in range(3)], dtype=np.float32)
    proposed = np.array([[0.5], [0.25], [0.125]])
    ep = episode_from_ticks(7, obs, proposed, goal_dim=3)
    assert ep.n_steps == 2
    np.testing.assert_array_equal(ep.observations, obs[:2])
    np.testing.assert_array_equal(ep.actions, [[0.5], [0.25]])
    np.testing.assert_array_equal(ep.achieved_next, [[1, 0, 0], [2, 0, 0]])  # the position *after* each action
    np.testing.assert_array_equal(ep.goal, [9, 9, 9])


def test_episode_with_a_moving_target_or_one_tick_is_refused() -> None:
    obs = np.zeros((3, 7), dtype=np.float32)
    obs[2, -1] = 1.0
    with pytest.raises(ValueError, match="desired goal changes"):
        episode_from_ticks(1, obs, np.zeros((3, 1)), goal_dim=3)
    with pytest.raises(ValueError, match="needs two"):
        episode_from_ticks(1, obs[:1], np.zeros((1, 1)), goal_dim=3)


def test_grouping_by_target_with_tolerance_and_leftovers() -> None:
    rng = np.random.default_rng(0)
    a, b, c = [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]
    eps = [fake_episode(i, a, 11, rng) for i in range(5)]  # 5 attempts at A
    eps += [fake_episode(10 + i, np.add(b, 0.004), 11, rng) for i in range(3)]  # B, 4 mm off: same target
    eps += [fake_episode(20, c, 11, rng)]  # C once
    eps += [fake_episode(30, a, 6, rng)]  # too short
    bad = fake_episode(40, a, 11, rng)
    bad.actions[3, 0] = np.nan
    eps.append(bad)
    grouped = group_by_target(eps, group_size=2, n_steps=8, goal_tolerance_m=0.01)
    # A: 5 -> 2 groups + 1 left; B: 3 -> 1 group + 1 left; C: 1 left. Leftovers 3 -> 1 hindsight group + 1 dropped.
    assert [[e.episode_id for e in g] for g in grouped.groups] == [[0, 1], [2, 3], [10, 11]]
    assert [[e.episode_id for e in g] for g in grouped.hindsight_groups] == [[4, 12]]
    assert (grouped.dropped_unmatched, grouped.dropped_short, grouped.dropped_nonfinite) == (1, 1, 1)
    assert all(e.n_steps == 8 for g in grouped.groups for e in g)
    tight = group_by_target(eps, group_size=2, n_steps=8, goal_tolerance_m=0.001)
    assert [[e.episode_id for e in g] for g in tight.groups] == [[0, 1], [2, 3], [10, 11]]  # B's own ids match
    with pytest.raises(ValueError, match="group_size"):
        group_by_target(eps, group_size=1, n_steps=8)


def test_an_episode_with_a_nan_achieved_goal_or_goal_is_dropped() -> None:
    """A NaN achieved goal is never "farther than the threshold", so a sparse reward would score it as a success."""
    rng = np.random.default_rng(4)
    a = [0.1, 0.0, 0.0]
    eps = [fake_episode(i, a, 9, rng) for i in range(4)]
    eps[1].achieved_next[5] = np.nan  # the last used outcome (step 6 of 6) of an attempt that missed
    eps[2].goal[0] = np.inf
    eps[3].achieved_next[7] = np.nan  # past the 6 steps used: truncated away, the episode is kept
    grouped = group_by_target(eps, group_size=2, n_steps=6)
    assert grouped.dropped_nonfinite == 2
    assert [[e.episode_id for e in g] for g in grouped.groups] == [[0, 3]]
    assert sparse_reward(np.full((1, 3), np.nan), np.zeros((1, 3)), None)[0] == 0.0  # NaN > threshold is False
    assert grouped.stats()["finetune/dropped_nonfinite"] == 2.0


def test_a_nan_desired_goal_is_named_not_called_a_moving_target() -> None:
    obs = np.zeros((3, 7), dtype=np.float32)
    obs[1, -1] = np.nan
    with pytest.raises(ValueError, match=r"desired goal is NaN or inf at tick\(s\) \[1\]"):
        episode_from_ticks(1, obs, np.zeros((3, 1)), goal_dim=3)


def make_policy() -> GoalGaussianPolicy:
    th.manual_seed(0)
    obs_space, act_space = goal_spaces(OBS_DIM, GOAL_DIM, ACTION_DIM)
    return GoalGaussianPolicy(obs_space, act_space, lambda _: 3e-4, net_arch=(16,))


def test_rows_from_target_groups_and_hindsight_only_groups() -> None:
    rng = np.random.default_rng(1)
    a, b, c = [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]
    # Target A: 2 members, one reaches the goal -> non-zero group variance. B and C once each -> hindsight only.
    eps = [fake_episode(0, a, 9, rng, reach=True), fake_episode(1, a, 9, rng), fake_episode(2, b, 9, rng)]
    eps.append(fake_episode(3, c, 9, rng))
    grouped = group_by_target(eps, group_size=2, n_steps=8)
    policy = make_policy()
    k = 2
    samples, stats = build_finetune_samples(
        grouped, policy, sparse_reward, np.random.default_rng(2), hindsight_kwargs={"n_sampled_goal": k}
    )
    t, g = 8, 2
    # "final" relabelling keeps every step: target group (1 + K) * T * G rows, hindsight-only group K * T * G.
    rows = samples
    assert len(rows.observations) == (1 + k) * t * g + k * t * g
    assert stats["finetune/n_samples"] == len(rows.observations)
    hindsight_rows = rows.observations[(1 + k) * t * g :]
    goals = hindsight_rows[:, -GOAL_DIM:].numpy()
    finals = np.stack([eps[2].achieved_next[-1], eps[3].achieved_next[-1]]).astype(np.float32)
    # Every hindsight-only row targets a final position reached inside its group, never an original goal.
    assert all(np.any(np.all(np.isclose(goal, finals, atol=1e-6), axis=1)) for goal in goals)
    # Original-goal rows of target A: the reaching member has the larger advantage at the last step.
    adv = rows.advantages[: t * g].reshape(t, g)
    assert adv[-1, 0] > 0 > adv[-1, 1]
    # pi_old and the reference are the deployed policy: identical log-probs on the original rows.
    th.testing.assert_close(rows.old_log_prob[: t * g], rows.ref_log_prob[: t * g])
    batches = list(minibatches(samples, batch_size=20, generator=th.Generator().manual_seed(0)))
    assert sum(len(b.observations) for b in batches) == len(rows.observations)


def test_no_complete_group_is_a_clear_error() -> None:
    rng = np.random.default_rng(3)
    grouped = group_by_target([fake_episode(0, [0.1, 0, 0], 9, rng)], group_size=2, n_steps=8)
    with pytest.raises(ValueError, match="no complete group"):
        build_finetune_samples(grouped, make_policy(), sparse_reward, rng)


def test_a_misspelt_hindsight_option_is_refused_naming_the_allowed_keys() -> None:
    rng = np.random.default_rng(5)
    eps = [fake_episode(i, [0.1, 0, 0], 9, rng) for i in range(2)]
    grouped = group_by_target(eps, group_size=2, n_steps=8)
    assert "n_sampled_goal" in hindsight_buffer_options() and "gamma" not in hindsight_buffer_options()
    with pytest.raises(ValueError, match=r"\['n_sampled_goals'\].*allowed keys: .*n_sampled_goal"):
        build_finetune_samples(grouped, make_policy(), sparse_reward, rng, hindsight_kwargs={"n_sampled_goals": 4})


def test_finetune_driver_applies_the_ewc_term_through_the_public_api() -> None:
    import copy

    import envs  # noqa: F401  (registers PointReach-v0)
    from robot_grpo.ewc import EWCPenalty, gaussian_fisher_diagonal
    from robot_grpo.finetune_data import finetune_on_samples
    from robot_grpo.grpo import GRPO

    rng = np.random.default_rng(4)
    # PointReach with delay 1: flat obs = 6 state + 3 history + 3 achieved + 3 desired = 15 values, 3-D action.
    model = GRPO(
        "MultiInputPolicy",
        "PointReach-v0",
        group_size=2,
        n_groups=1,
        n_steps=50,
        n_epochs=2,
        batch_size=256,
        policy_kwargs={"net_arch": (16,)},
        seed=0,
    )
    episodes = []
    for i in range(4):
        goal = np.array([0.1, 0.0, 0.0])
        n = 9
        achieved = np.linspace(0.0, 1.0, n)[:, None] * (goal if i % 2 == 0 else -goal)
        obs = np.concatenate([rng.standard_normal((n, 9)), achieved, np.broadcast_to(goal, (n, 3))], axis=1)
        episodes.append(episode_from_ticks(i, obs, rng.uniform(-1, 1, (n, 3)), goal_dim=3))
    grouped = group_by_target(episodes, group_size=2, n_steps=8)
    deployed = copy.deepcopy(model.policy)
    samples, _ = build_finetune_samples(grouped, deployed, sparse_reward, rng)
    anchor = {k: v.detach().clone() for k, v in model.policy.named_parameters()}
    fisher = gaussian_fisher_diagonal(model.policy, model.policy.distribution_params, samples.observations)

    def drift(m) -> float:
        return sum(float((p.detach() - anchor[k]).square().sum()) for k, p in m.policy.named_parameters())

    free = copy.deepcopy(model)
    logs = finetune_on_samples(free, samples, n_updates=3)
    held = copy.deepcopy(model)
    term = EWCPenalty(anchor, fisher, lam=1e4)
    logs_ewc = finetune_on_samples(held, samples, n_updates=3, extra_loss_terms=[term], sim_every=2)
    assert "train/extra/ewc_penalty" in logs_ewc and "train/extra/ewc_penalty" not in logs
    assert drift(free) > 0
    assert drift(held) < 0.5 * drift(free)  # a strong penalty holds the weights near the anchor
    assert held.extra_loss_terms == [] and held.ref_update_interval == model.ref_update_interval  # left as it was
    assert held.num_timesteps == 2 * 50  # one sim group rollout (sim_every=2 of 3 updates)
    for key, value in held.ref_policy.state_dict().items():  # the deployed policy stayed the reference
        assert th.equal(value, model.policy.state_dict()[key]), key
    # the minibatch order comes from the given generator, never torch's global RNG
    runs = []
    for global_seed in (1, 2):
        th.manual_seed(global_seed)
        again = copy.deepcopy(model)
        finetune_on_samples(again, samples, n_updates=2, generator=th.Generator().manual_seed(7))
        runs.append({k: v.detach().clone() for k, v in again.policy.named_parameters()})
    assert all(th.equal(runs[0][k], runs[1][k]) for k in runs[0])


def reaching_pair(rng: np.random.Generator, flags_of_second: np.ndarray | None):
    """Two attempts at one target that walk the same line to it; the second's ticks carry ``flags_of_second``."""
    goal = np.array([0.1, 0.0, 0.0])
    n_ticks = 9
    frac = np.linspace(0.0, 1.0, n_ticks)[:, None]
    episodes = []
    for episode_id, flags in ((0, np.zeros(n_ticks, bool)), (1, flags_of_second)):
        achieved = frac * goal
        obs = np.concatenate(
            [rng.standard_normal((n_ticks, INNER_DIM)), achieved, np.broadcast_to(goal, (n_ticks, 3))], 1
        )
        actions = rng.uniform(-1, 1, size=(n_ticks, ACTION_DIM))
        episodes.append(episode_from_ticks(episode_id, obs, actions, GOAL_DIM, int(flags.sum()), intervened=flags))
    return episodes


def test_an_intervention_penalty_ranks_the_attempt_that_leaned_on_the_filter_lower() -> None:
    flags = np.zeros(9, bool)
    flags[[1, 2]] = True  # the filter changed the second attempt's actions at ticks 1 and 2
    grouped = group_by_target(reaching_pair(np.random.default_rng(4), flags), group_size=2, n_steps=8)
    policy = make_policy()
    t, g, k = 8, 2, 1

    def advantages(penalty: float) -> np.ndarray:
        rows, _ = build_finetune_samples(
            grouped,
            policy,
            sparse_reward,
            np.random.default_rng(5),
            hindsight_kwargs={"n_sampled_goal": k},
            intervention_penalty=penalty,
        )
        return rows.advantages.numpy().reshape(1 + k, t, g)  # original rows, then the hindsight copies

    np.testing.assert_allclose(advantages(0.0), 0.0, atol=1e-6)  # same outcome, same path: nothing to prefer
    penalized = advantages(1.0)
    # Up to its last intervention the second attempt scores lower, in the relabelled copies too
    assert np.all(penalized[:, :3, 1] < 0) and np.all(penalized[:, :3, 0] > 0)
    np.testing.assert_allclose(penalized[:, 3:], 0.0, atol=1e-6)  # after it, the two are alike again


def test_a_penalty_needs_per_tick_flags_and_a_reward_it_can_use() -> None:
    no_flags = [fake_episode(i, [0.1, 0, 0], 9, np.random.default_rng(6)) for i in range(2)]
    grouped = group_by_target(no_flags, group_size=2, n_steps=8)
    with pytest.raises(ValueError, match="no per-tick intervention flags"):
        build_finetune_samples(grouped, make_policy(), sparse_reward, np.random.default_rng(0), intervention_penalty=1)
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="intervention_penalty must be a finite reward >= 0"):
            build_finetune_samples(
                grouped, make_policy(), sparse_reward, np.random.default_rng(0), intervention_penalty=bad
            )
    with pytest.raises(ValueError, match="one flag per tick"):
        episode_from_ticks(0, np.zeros((3, OBS_DIM)), np.zeros((3, ACTION_DIM)), GOAL_DIM, intervened=np.zeros(2, bool))

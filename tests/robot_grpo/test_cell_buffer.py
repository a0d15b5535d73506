"""Cell group buffer: virtual groups per agent, the team reward on every agent's rows, team hindsight per arm,
violations never relabelled away. Hand-built stacked spaces and a tiny policy; the arithmetic is in the comments."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from robot_grpo.cell_buffer import CellGroupBuffer, agent_rows
from robot_grpo.cell_policy import CellGaussianPolicy

N_AGENTS, OBS, GOAL, ACT = 2, 4, 3, 2
T, G, N_GROUPS = 3, 2, 2
THRESHOLD = 0.05


def stacked_spaces() -> tuple[spaces.Dict, spaces.Box]:
    box = lambda d: spaces.Box(-np.inf, np.inf, shape=(N_AGENTS, d), dtype=np.float64)  # noqa: E731
    obs = spaces.Dict({"observation": box(OBS), "achieved_goal": box(GOAL), "desired_goal": box(GOAL)})
    return obs, spaces.Box(-1.0, 1.0, shape=(N_AGENTS, ACT), dtype=np.float32)


def team_reward(achieved: np.ndarray, desired: np.ndarray, info: object) -> np.ndarray:
    """0 when every arm is within THRESHOLD of its goal, else -1 ([..., n_agents, d] each)."""
    far = np.linalg.norm(achieved - desired, axis=-1) > THRESHOLD
    return -np.any(far, axis=-1).astype(np.float32)


def make_buffer(**kwargs) -> tuple[CellGroupBuffer, CellGaussianPolicy]:
    obs_space, act_space = stacked_spaces()
    buffer = CellGroupBuffer(T, obs_space, act_space, G, N_GROUPS, gamma=1.0, **kwargs)
    policy = CellGaussianPolicy(obs_space, act_space, lambda _: 1e-3, net_arch=(8,))
    return buffer, policy


def cell_obs(rng: np.random.Generator, goals: np.ndarray) -> dict[str, np.ndarray]:
    n_cells = G * N_GROUPS
    return {
        "observation": rng.normal(size=(n_cells, N_AGENTS, OBS)),
        "achieved_goal": rng.normal(size=(n_cells, N_AGENTS, GOAL)),
        "desired_goal": goals.copy(),
    }


def test_rows_carry_the_agent_one_hot_and_the_virtual_layout_groups_each_agent() -> None:
    buffer, _ = make_buffer()
    per_cell = np.arange(G * N_GROUPS * N_AGENTS).reshape(G * N_GROUPS, N_AGENTS)  # value = cell * 2 + agent
    virtual = buffer.to_virtual(per_cell)
    # Virtual group (g * 2 + a) holds agent a of cells g*G .. g*G+G-1: group 0 = agent 0 of cells 0, 1 -> 0, 2.
    assert virtual.reshape(N_GROUPS * N_AGENTS, G).tolist() == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert np.array_equal(buffer.to_cells(virtual), per_cell)
    rows = agent_rows(cell_obs(np.random.default_rng(0), np.zeros((G * N_GROUPS, N_AGENTS, GOAL))))
    assert rows.shape == (G * N_GROUPS, N_AGENTS, OBS + 2 * GOAL + N_AGENTS)
    assert rows[:, 1, -N_AGENTS:].tolist() == [[0.0, 1.0]] * (G * N_GROUPS)


def fill(buffer: CellGroupBuffer, team: np.ndarray, achieved: np.ndarray, violated: np.ndarray, goals: np.ndarray):
    rng = np.random.default_rng(1)
    for t in range(T):
        rows = buffer.rows(cell_obs(rng, goals))
        actions = rng.normal(size=(buffer.n_envs, ACT)).astype(np.float32)
        buffer.add_cell(rows, actions, team[t], achieved[t], violated[t])


def test_both_agents_are_scored_by_the_team_outcome() -> None:
    buffer, policy = make_buffer(hindsight=False)
    n_cells = G * N_GROUPS
    team = np.full((T, n_cells), -1.0)
    team[:, 0] = 0.0  # cell 0 (group 0, member 0) succeeds at every step, cell 1 fails
    goals = np.zeros((n_cells, N_AGENTS, GOAL))
    fill(buffer, team, np.zeros((T, n_cells, N_AGENTS, GOAL)), np.zeros((T, n_cells), bool), goals)
    stats = buffer.compute(policy, None, team_reward, np.random.default_rng(0))
    adv = buffer.samples.advantages.numpy().reshape(T, N_GROUPS * N_AGENTS, G)
    # Cell group 0: returns-to-go 0 vs -(T - t) -> +1 / -1 after the group std; cells 2, 3 (both fail): 0.
    np.testing.assert_allclose(adv[:, 0], [[1.0, -1.0]] * T, atol=1e-6)  # virtual group 0: agent 0 of cells 0, 1
    np.testing.assert_allclose(adv[:, 1], [[1.0, -1.0]] * T, atol=1e-6)  # virtual group 1: agent 1, same cells
    assert np.all(adv[:, 2:] == 0.0)
    assert stats["rollout/zero_std_groups"] == 0.5


def test_team_hindsight_relabels_each_arm_and_never_relabels_a_violation_away() -> None:
    buffer, policy = make_buffer(n_sampled_goal=G)  # "final": every member's end point once
    n_cells = G * N_GROUPS
    achieved = np.zeros((T, n_cells, N_AGENTS, GOAL))
    achieved[..., 0] = np.arange(n_cells)[None, :, None]  # cell c's arms end at x = c, far apart from each other
    achieved[..., 1] = np.arange(N_AGENTS)[None, None, :]
    violated = np.zeros((T, n_cells), bool)
    violated[1:, 1] = True  # cell 1 broke the separation at step 1
    goals = np.full((n_cells, N_AGENTS, GOAL), 9.0)  # nobody reaches the original goals
    fill(buffer, np.full((T, n_cells), -1.0), achieved, violated, goals)
    buffer.log_prob = np.zeros((T, buffer.n_envs), np.float32)  # compute() scores these before it relabels
    copies = buffer._relabel(policy, team_reward, np.random.default_rng(0), None)
    assert copies is not None
    # Each relabelled goal pair is one member's end points, arm by arm: the rows' desired_goal block shows them.
    desired = copies.observations[..., OBS + GOAL : OBS + 2 * GOAL].reshape(G, T, N_GROUPS, N_AGENTS, G, GOAL)
    assert set(desired[:, 0, 0, 0, 0, 0].tolist()) == {0.0, 1.0}  # group 0 relabelled with cell 0's and cell 1's
    assert np.all(desired[:, :, :, 1, :, 1] == 1.0) and np.all(desired[:, :, :, 0, :, 1] == 0.0)
    rewards = copies.rewards.reshape(G, T, N_GROUPS, N_AGENTS, G)
    for k in range(G):
        donor = int(desired[k, 0, 0, 0, 0, 0])  # the member whose end points group 0 was relabelled with
        if donor == 0:  # cell 0 reached its own end points at every step: team reward 0 for member 0
            assert rewards[k, :, 0, :, 0].tolist() == [[0.0, 0.0]] * T
        else:  # cell 1 reached them too, but its violation keeps -1 from step 1 on
            assert rewards[k, :, 0, :, 1].tolist() == [[0.0, 0.0], [-1.0, -1.0], [-1.0, -1.0]]
    assert np.all(copies.weights <= 1.0)


def test_hindsight_rows_enter_the_training_set() -> None:
    buffer, policy = make_buffer(n_sampled_goal=2)
    n_cells = G * N_GROUPS
    achieved = np.random.default_rng(2).normal(size=(T, n_cells, N_AGENTS, GOAL))
    fill(buffer, np.full((T, n_cells), -1.0), achieved, np.zeros((T, n_cells), bool), np.zeros_like(achieved[0]))
    stats = buffer.compute(policy, None, team_reward, np.random.default_rng(0))
    rows_per_copy = T * n_cells * N_AGENTS
    assert buffer.n_samples == 3 * rows_per_copy  # the original goals and two relabelled goal pairs
    assert stats["hindsight/relabelled_success"] == pytest.approx(1 / G)  # only the donor reaches both end points

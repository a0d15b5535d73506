"""Group buffer of a cell of agents: groups of whole-cell rollouts, advantages on the team outcome, team hindsight.

A cell env (``TwoArmCell-v0``) stacks its agents on the first axis of every observation and action. A group is G
rollouts of the whole cell from one snapshot (``group_reset``). Each agent's decisions become rows of a "virtual"
group: virtual group ``g * n_agents + a`` holds agent ``a``'s rows of the G members of cell group ``g``, and every
row is scored by the **team** reward of its cell rollout. So an arm's action is compared with the same arm's
actions in the sibling rollouts, on the joint result (centralized training); :class:`GroupRolloutBuffer` does the
rest (returns-to-go, group-relative advantages, training rows) unchanged.

Hindsight per arm, on the team: a relabelled goal is a pair, each arm's goal replaced with what that arm reached
in one member of the group (the same member and step for both arms; strategies as ``robot_grpo.hindsight``); the
team reward is recomputed with the env's vectorized ``compute_reward`` over both arms; a step at or after a
separation violation keeps its -1 under every goal (a violation is never relabelled away), and the goal-independent
part of a step's reward (``add_cell(reward_offsets=...)``, the cell's proximity term) is kept. Relabelled rows carry
truncated per-decision importance weights as the single-agent buffer's do.

Row layout: ``[observation, achieved_goal, desired_goal, one-hot agent id]`` (``robot_grpo.cell_policy``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from robot_grpo.buffers import (
    ComputeReward,
    GroupRolloutBuffer,
    NormalizeObs,
    RelabelledCopies,
    score_log_prob,
)
from robot_grpo.cell_policy import agent_row_spaces
from robot_grpo.hindsight import DEFAULT_N_SAMPLED_GOAL, HindsightConfig, importance_weights, sample_group_goals
from robot_grpo.policies import OBS_KEYS, GoalGaussianPolicy

VIOLATION_REWARD = -1.0  # a violated step's team reward under any goal (the sparse failure reward)


def agent_rows(obs: dict[str, np.ndarray]) -> np.ndarray:
    """Stacked cell observations (``[n_cells, n_agents, dim]`` per key) -> rows ``[n_cells, n_agents, row_dim]``."""
    first = np.asarray(obs[OBS_KEYS[0]])
    n_cells, n_agents = first.shape[:2]
    one_hot = np.broadcast_to(np.eye(n_agents, dtype=np.float32), (n_cells, n_agents, n_agents))
    parts = [np.asarray(obs[k], dtype=np.float32).reshape(n_cells, n_agents, -1) for k in OBS_KEYS]
    return np.concatenate([*parts, one_hot], axis=-1)


class CellGroupBuffer(GroupRolloutBuffer):
    """Stores ``n_steps`` steps of ``n_groups`` x ``group_size`` cells (see the module docstring).

    :param observation_space: the cell's stacked Dict space; :param action_space: its stacked action Box.
    :param hindsight: relabel groups with the goal pairs they reached (False: team outcome only, the ablation).
    :param hindsight_strategy: "final" | "future" | "episode"; :param n_sampled_goal: goal pairs per group.
    :param is_correction: importance-weight the relabelled rows; :param is_clip: their truncation;
    :param is_self_normalize: self-normalize the weights per time step.
    Other parameters: as :class:`GroupRolloutBuffer` (per cell group).
    """

    def __init__(
        self,
        n_steps: int,
        observation_space: spaces.Dict,
        action_space: spaces.Box,
        group_size: int,
        n_groups: int,
        device: Any = "cpu",
        gamma: float = 0.98,
        scale_advantages: str = "group",
        outcome_only: bool = False,
        hindsight: bool = True,
        hindsight_strategy: str = "final",
        n_sampled_goal: int = DEFAULT_N_SAMPLED_GOAL,
        is_correction: bool = True,
        is_clip: float = 1.0,
        is_self_normalize: bool = False,
    ) -> None:
        n_agents, row_space, agent_action = agent_row_spaces(observation_space, action_space)
        self.n_agents, self.n_cell_groups, self.n_cells = n_agents, int(n_groups), int(group_size) * int(n_groups)
        self.agent_goal_dim = int(observation_space["desired_goal"].shape[1])
        self.hindsight = (
            HindsightConfig(hindsight_strategy, n_sampled_goal, is_correction, is_clip, is_self_normalize)
            if hindsight
            else None
        )
        super().__init__(
            n_steps, row_space, agent_action, group_size, n_groups * n_agents, device, gamma, scale_advantages,
            outcome_only,
        )  # fmt: skip

    def reset(self) -> None:
        super().reset()
        shape = (self.n_steps, self.n_cells, self.n_agents, self.agent_goal_dim)
        self.cell_achieved = np.zeros(shape, dtype=np.float64)
        self.violated = np.zeros((self.n_steps, self.n_cells), dtype=bool)

    # Layout: cells [n_groups, G, n_agents] <-> virtual envs [n_groups, n_agents, G] -----------------------------
    def to_virtual(self, per_cell_agent: np.ndarray) -> np.ndarray:
        """``[n_cells, n_agents, ...]`` -> ``[n_virtual_envs, ...]`` (virtual env ``(g * n_agents + a) * G + m``)."""
        x = per_cell_agent.reshape(self.n_cell_groups, self.group_size, self.n_agents, *per_cell_agent.shape[2:])
        return np.swapaxes(x, 1, 2).reshape(self.n_envs, *per_cell_agent.shape[2:])

    def to_cells(self, per_virtual: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`to_virtual`: ``[n_virtual_envs, ...]`` -> ``[n_cells, n_agents, ...]``."""
        x = per_virtual.reshape(self.n_cell_groups, self.n_agents, self.group_size, *per_virtual.shape[1:])
        return np.swapaxes(x, 1, 2).reshape(self.n_cells, self.n_agents, *per_virtual.shape[1:])

    def rows(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The policy's input rows of a stacked cell observation, in virtual-env order ``[n_virtual_envs, row]``."""
        return self.to_virtual(agent_rows(obs))

    def add_cell(
        self,
        rows: np.ndarray,
        actions: np.ndarray,
        team_rewards: np.ndarray,
        achieved_next: np.ndarray,
        violated: np.ndarray,
        reward_offsets: np.ndarray | None = None,
    ) -> None:
        """Store one vectorized cell step.

        :param rows: the rows the actions were taken on ``[n_virtual_envs, row_dim]`` (from :meth:`rows`).
        :param actions: sampled actions ``[n_virtual_envs, action_dim]``.
        :param team_rewards: the cells' team rewards ``[n_cells]``.
        :param achieved_next: each arm's achieved goal after the step ``[n_cells, n_agents, d]``.
        :param violated: whether each cell's separation has been violated by the end of the step ``[n_cells]``.
        :param reward_offsets: the goal-independent part of each cell's reward ``[n_cells]`` (e.g. the cell's
            proximity term); hindsight keeps it under every goal. None = 0.
        """

        def per_row(per_cell: np.ndarray) -> np.ndarray:
            return self.to_virtual(np.repeat(np.asarray(per_cell, dtype=np.float32)[:, None], self.n_agents, axis=1))

        offsets = None if reward_offsets is None else per_row(reward_offsets)
        self.cell_achieved[self.pos] = achieved_next
        self.violated[self.pos] = violated
        self.add(rows, actions, per_row(team_rewards), None, offsets)

    def _relabel(
        self,
        policy: GoalGaussianPolicy,
        compute_reward: ComputeReward | None,
        rng: np.random.Generator,
        normalize_obs: NormalizeObs | None,
    ) -> RelabelledCopies | None:
        if self.hindsight is None:
            return None
        if compute_reward is None:
            raise ValueError("team hindsight needs the cell's vectorized compute_reward")
        cfg = self.hindsight
        T, G, n, d, R = self.n_steps, self.group_size, self.n_agents, self.agent_goal_dim, self.obs_dim
        K, n_groups = cfg.n_sampled_goal, self.n_cell_groups
        achieved = self.cell_achieved.reshape(T, n_groups, G, n, d)
        goals, horizon = sample_group_goals(achieved.reshape(T, n_groups, G, n * d), cfg.strategy, K, rng)
        goals = goals.reshape(K, n_groups, n, d)  # each arm's goal: what that arm reached in one member
        ag = np.broadcast_to(achieved[None], (K, T, n_groups, G, n, d))
        dg = np.broadcast_to(goals[:, None, :, None], (K, T, n_groups, G, n, d))
        team = np.asarray(compute_reward(ag.reshape(-1, n, d), dg.reshape(-1, n, d), None), dtype=np.float32)
        team = team.reshape(K, T, n_groups, G)
        team = np.where(self.violated.reshape(T, n_groups, G)[None], VIOLATION_REWARD, team).astype(np.float32)
        rewards = np.repeat(team[:, :, :, None, :], n, axis=3).reshape(K, T, n_groups * n, G)
        goal_rewards = rewards
        rewards = rewards + self._grouped(self.reward_offsets)[None]  # goal-independent: kept under every goal
        mask = np.repeat((np.arange(T)[None, :, None] <= horizon[:, None, :])[..., None], n, axis=2)
        mask = mask.reshape(K, T, n_groups * n, 1)

        obs = np.broadcast_to(self._grouped(self.observations)[None], (K, T, n_groups * n, G, R)).copy()
        goal_cols = slice(R - n - d, R - n)  # desired_goal: the block before the one-hot id
        obs[..., goal_cols] = goals.reshape(K, n_groups * n, d)[:, None, :, None, :]
        obs = self._policy_inputs(obs.reshape(K, T, self.n_envs, R), normalize_obs)
        actions = np.broadcast_to(self.actions[None], (K, T, self.n_envs, self.action_dim)).reshape(-1, self.action_dim)
        log_prob = score_log_prob(policy, obs.reshape(-1, R), actions, self.device).reshape(K, T, n_groups * n, G)
        if cfg.is_correction:
            weights = importance_weights(
                log_prob, self._grouped(self.log_prob), mask, cfg.is_clip, cfg.is_self_normalize
            )
        else:
            weights = np.broadcast_to(mask, log_prob.shape).astype(np.float32)
        horizon_v = np.repeat(horizon, n, axis=1)
        return RelabelledCopies(obs, rewards, mask, log_prob, weights, horizon_v, goal_rewards)

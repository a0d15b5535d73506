"""Gaussian policy for a cell of identical agents: one row per agent, the agent's one-hot at the end of the row.

A training row is one agent's flat goal observation (``OBS_KEYS`` order) followed by the agent's one-hot id, so
one GRPO batch holds both arms' decisions. How the agents share parameters (``sharing``):

- ``"heads"``: one trunk (the hidden layers) for all agents and a linear head per agent (the design's parameter
  sharing for identical agents);
- ``"agent_id"``: one network whose input is the observation plus the one-hot id;
- ``"none"``: a separate network per agent (no sharing; the same class, for comparison).

The observation normalizer sees the observation part only (the one-hot passes through unnormalized); the log-std
is shared. :meth:`CellGaussianPolicy.make_agent_export_module` bakes one agent in: float32 [B, obs] -> action,
what one arm's runtime runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import nn

from robot_grpo.policies import OBS_KEYS, ExportModule, GoalGaussianPolicy, RunningNormalizer, build_mlp, flatten_obs

SHARING_MODES = ("heads", "agent_id", "none")


def agent_row_spaces(observation_space: spaces.Dict, action_space: spaces.Box) -> tuple[int, spaces.Box, spaces.Box]:
    """(n_agents, one agent's row space incl. one-hot, one agent's action space) of a stacked cell env.

    The cell's spaces stack the agents on the first axis: ``observation [n, D]``, ``achieved_goal [n, d]``,
    ``desired_goal [n, d]``, action ``[n, A]``.
    """
    if not isinstance(observation_space, spaces.Dict) or any(k not in observation_space.spaces for k in OBS_KEYS):
        raise ValueError(f"a cell policy needs a Dict observation space with {OBS_KEYS} stacked per agent")
    shapes = [observation_space[k].shape for k in OBS_KEYS]
    if any(len(s) != 2 for s in shapes) or len({s[0] for s in shapes}) != 1:
        raise ValueError(f"cell observations must be [n_agents, dim] per key, got shapes {shapes}")
    n_agents = shapes[0][0]
    if len(action_space.shape) != 2 or action_space.shape[0] != n_agents:
        raise ValueError(f"cell actions must be [n_agents={n_agents}, dim], got {action_space.shape}")
    row_dim = sum(s[1] for s in shapes) + n_agents
    row = spaces.Box(-np.inf, np.inf, shape=(row_dim,), dtype=np.float32)
    action = spaces.Box(action_space.low[0], action_space.high[0], dtype=np.float32)
    return n_agents, row, action


class AgentRoutedNet(nn.Module):
    """Mean network over (normalized observation, one-hot id) -> action mean, for one of ``SHARING_MODES``."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        n_agents: int,
        sharing: str,
        net_arch: tuple[int, ...],
        activation_fn: type[nn.Module],
        ortho_init: bool,
    ) -> None:
        super().__init__()
        if sharing not in SHARING_MODES:
            raise ValueError(f"sharing must be one of {SHARING_MODES}, got {sharing!r}")
        self.sharing, self.n_agents, self.action_dim = sharing, n_agents, action_dim
        if sharing == "agent_id":
            self.net = build_mlp(obs_dim + n_agents, action_dim, net_arch, activation_fn, ortho_init)
        elif sharing == "heads":  # one trunk; its last layer holds one linear head per agent
            self.net = build_mlp(obs_dim, action_dim * n_agents, net_arch, activation_fn, ortho_init)
        else:
            self.nets = nn.ModuleList(
                build_mlp(obs_dim, action_dim, net_arch, activation_fn, ortho_init) for _ in range(n_agents)
            )

    def forward(self, z: th.Tensor, one_hot: th.Tensor) -> th.Tensor:
        if self.sharing == "agent_id":
            return self.net(th.cat([z, one_hot], dim=-1))
        if self.sharing == "heads":
            per_agent = self.net(z).reshape(-1, self.n_agents, self.action_dim)
        else:
            per_agent = th.stack([net(z) for net in self.nets], dim=1)
        return (per_agent * one_hot[:, :, None]).sum(dim=1)


class _AgentExport(nn.Module):
    """One agent's deterministic action: float32 [B, obs_dim] -> [B, action_dim], normalizer and clip inside."""

    def __init__(self, policy: CellGaussianPolicy, agent: int) -> None:
        super().__init__()
        self.normalizer = policy.obs_normalizer
        self.mean_net = policy.mean_net
        one_hot = th.zeros(1, policy.n_agents)
        one_hot[0, agent] = 1.0
        self.register_buffer("one_hot", one_hot)
        self.register_buffer("low", policy.action_low.detach().clone())
        self.register_buffer("high", policy.action_high.detach().clone())

    def forward(self, obs: th.Tensor) -> th.Tensor:
        action = self.mean_net(self.normalizer(obs), self.one_hot.expand(obs.shape[0], -1))
        return th.maximum(th.minimum(action, self.high), self.low)


class CellGaussianPolicy(GoalGaussianPolicy):
    """:class:`GoalGaussianPolicy` over agent rows (see the module docstring).

    :param observation_space: the cell's stacked Dict space, or (when loading) one agent's row Box.
    :param action_space: the cell's stacked action Box, or one agent's.
    :param n_agents: agents in the cell (read from a stacked space; needed with row spaces).
    :param sharing: "heads" | "agent_id" | "none".
    Other parameters: as :class:`GoalGaussianPolicy` (``norm_preserve_outputs`` is not supported).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        lr_schedule: Schedule,
        n_agents: int | None = None,
        sharing: str = "heads",
        **kwargs: Any,
    ) -> None:
        if isinstance(observation_space, spaces.Dict):
            n_agents, observation_space, action_space = agent_row_spaces(observation_space, action_space)
        if n_agents is None or n_agents < 1:
            raise ValueError("CellGaussianPolicy needs the cell's stacked spaces or n_agents >= 1 with row spaces")
        if kwargs.get("norm_preserve_outputs"):
            raise ValueError("norm_preserve_outputs is not supported by CellGaussianPolicy")
        if sharing not in SHARING_MODES:
            raise ValueError(f"sharing must be one of {SHARING_MODES}, got {sharing!r}")
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)
        self.n_agents, self.sharing = int(n_agents), sharing
        self.agent_obs_dim = self.obs_dim - self.n_agents
        self.obs_normalizer = RunningNormalizer(self.agent_obs_dim, self.norm_clip, self.norm_std_min)
        self.mean_net = AgentRoutedNet(
            self.agent_obs_dim,
            self.action_dim,
            self.n_agents,
            sharing,
            self.net_arch,
            self.activation_fn,
            self.ortho_init,
        )
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(n_agents=self.n_agents, sharing=self.sharing)
        return data

    def update_normalizer(self, flat_obs: th.Tensor) -> None:
        if self.normalize_obs:
            self.obs_normalizer.update(flat_obs.reshape(-1, self.obs_dim)[:, : self.agent_obs_dim])

    def distribution_params(self, obs: PyTorchObs) -> tuple[th.Tensor, th.Tensor]:
        """Mean [B, action_dim] and log-std of pi(. | row) for agent rows [B, obs + n_agents]."""
        rows = flatten_obs(obs)
        z = self._normalize(rows[:, : self.agent_obs_dim])
        return self.mean_net(z, rows[:, self.agent_obs_dim :]), self.log_std

    def make_export_module(self) -> nn.Module:
        raise ValueError("a cell policy exports one module per agent: use make_agent_export_module(agent)")

    def make_agent_export_module(self, agent: int) -> nn.Module:
        """One agent's module: float32 [B, obs] (its flat goal observation, no id) -> clipped deterministic action."""
        if not 0 <= agent < self.n_agents:
            raise ValueError(f"agent must be in 0..{self.n_agents - 1}, got {agent}")
        module = _AgentExport(self, agent)
        if not self.normalize_obs:
            module.normalizer = RunningNormalizer(self.agent_obs_dim, clip=float("inf"), std_min=0.0)
        return module


__all__ = ["SHARING_MODES", "AgentRoutedNet", "CellGaussianPolicy", "ExportModule", "agent_row_spaces"]

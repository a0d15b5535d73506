"""PettingZoo's ParallelEnv API on the two-arm cell (``envs.two_arm_cell.TwoArmCellEnv`` does the work).

Agents ``arm_0`` and ``arm_1``. Each agent's observation is its row of the cell's stacked observation (a goal-env
Dict: ``observation``, ``achieved_goal``, ``desired_goal``, all in the arm's own frame), its action FetchReach's
4-D command in its own frame. Both agents get the team reward; at every step ``info[agent]["is_success"]`` is the
team's success (the same for both) and ``info[agent]["violation"]`` the separation violation, if any. A violation
terminates both agents; the time limit truncates both. ``snapshot()`` / ``reset(options={"snapshot": s})`` are the
cell's (``env.unwrapped`` is this env).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from envs.two_arm_cell import ACTION_DIM, AGENTS, CellSnapshot, TwoArmCellEnv


class TwoArmCellParallelEnv(ParallelEnv):
    """The two-arm cell as a PettingZoo ParallelEnv; ``kwargs`` go to :class:`TwoArmCellEnv`."""

    metadata: dict[str, Any] = {"name": "two_arm_cell_v0", "render_modes": []}  # noqa: RUF012

    def __init__(self, **kwargs: Any) -> None:
        self.cell = TwoArmCellEnv(**kwargs)
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        dim = self.cell.obs_dim
        goal = spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64)
        self.observation_spaces = {
            agent: spaces.Dict(
                {
                    "observation": spaces.Box(-np.inf, np.inf, shape=(dim,), dtype=np.float64),
                    "achieved_goal": goal,
                    "desired_goal": goal,
                }
            )
            for agent in AGENTS
        }
        self.action_spaces = {agent: spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32) for agent in AGENTS}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    @staticmethod
    def split(obs: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
        """The cell's stacked observation -> one goal-env observation per agent."""
        return {agent: {key: value[i].copy() for key, value in obs.items()} for i, agent in enumerate(AGENTS)}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.cell.reset(seed=seed, options=options)
        self.agents = list(AGENTS)
        return self.split(obs), {agent: dict(info) for agent in AGENTS}

    def step(self, actions: dict[str, np.ndarray]):
        if not self.agents:
            raise ValueError("the episode has ended; call reset() before step()")
        missing = [agent for agent in AGENTS if agent not in actions]
        if missing:
            raise ValueError(f"the cell needs an action for every arm; missing {missing}")
        joint = np.stack([np.asarray(actions[agent], dtype=np.float64).reshape(-1) for agent in AGENTS])
        obs, reward, terminated, truncated, info = self.cell.step(joint)
        agents = list(self.agents)
        if terminated or truncated:
            self.agents = []
        return (
            self.split(obs),
            {agent: float(reward) for agent in agents},
            {agent: bool(terminated) for agent in agents},
            {agent: bool(truncated) for agent in agents},
            {agent: dict(info) for agent in agents},
        )

    def snapshot(self) -> CellSnapshot:
        """The cell's snapshot (both arms, both delay lines); restore with ``reset(options={"snapshot": s})``."""
        return self.cell.snapshot()

    def state(self) -> np.ndarray:
        """The global state: both arms' observation rows and goals, flattened (world of the centralized trainer)."""
        obs = self.cell._last_obs
        if obs is None:
            raise ValueError("state() before the first reset()")
        return np.concatenate([obs[k].reshape(-1) for k in ("observation", "achieved_goal", "desired_goal")])

    def close(self) -> None:
        self.cell.close()


def two_arm_cell_parallel_env(**kwargs: Any) -> TwoArmCellParallelEnv:
    """The PettingZoo factory of the cell (``kwargs``: see :class:`envs.two_arm_cell.TwoArmCellEnv`)."""
    return TwoArmCellParallelEnv(**kwargs)

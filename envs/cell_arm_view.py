"""One arm of the two-arm cell as a single-agent goal env, in the layout of that arm's policy package.

What the exporter's sim checks of an arm package run (``deploy.export.cell_arm``): the observation is the arm's row
of ``TwoArmCellEnv`` reordered to the arm package's contract (``deploy.cell.policy_input.cell_arm_contract``: the
robot state, then ``partner_pos``, then the action history), so the package's flat input is
``contract.flatten(obs)`` as for any package. The partner arm is driven by a partner policy on its own arm view
(default: the scripted goal seeker, ``deploy.cell.scripted.GoalSeeker``; ``partner="hold"`` keeps it still).
``info["is_success"]`` is this arm's own outcome (its gripper on its goal at the end, no separation violation);
the cell's team outcome is ``info["team_success"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from deploy.cell.policy_input import cell_arm_contract
from deploy.cell.scripted import GoalSeeker
from deploy.contract import fetch_reach_contract
from envs.delayed_goal_env import goal_distance
from envs.two_arm_cell import ACTION_DIM, N_ARMS, PARTNER_DIM, STATE_DIM, TwoArmCellEnv

PARTNERS = ("goal_seeker", "hold")


class CellArmView(gym.Env):
    """Arm ``arm`` of a ``TwoArmCellEnv`` (module docstring).

    :param arm: which arm the agent drives (0 or 1).
    :param partner: "goal_seeker" or "hold", or a callable on the partner's flat observation [B, D] -> [B, 4].
    :param cell_kwargs: ``TwoArmCellEnv`` arguments.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, arm: int = 0, partner: str | Callable[[np.ndarray], np.ndarray] = "goal_seeker", **cell_kwargs):
        if arm not in range(N_ARMS):
            raise ValueError(f"arm must be 0 or 1, got {arm!r}")
        if isinstance(partner, str) and partner not in PARTNERS:
            raise ValueError(f"partner must be one of {PARTNERS} or a policy callable, got {partner!r}")
        self.cell = TwoArmCellEnv(**cell_kwargs)
        self.arm = arm
        self.contract = cell_arm_contract(fetch_reach_contract(self.cell.history_len))
        self.robot_spec = self.cell.robot_spec
        self.delay_range = self.cell.delay_range
        self.obs_noise_std_m = np.zeros(3)  # the cell is noise-free
        self.action_gain = 1.0
        self.distance_threshold = self.cell.distance_threshold
        if partner == "goal_seeker":
            partner = GoalSeeker(self.contract)
        self._partner = partner
        history = ACTION_DIM * self.cell.history_len
        # the cell's row is [state, history, partner]; the package's is [state, partner, history]
        self._order = np.r_[
            0:STATE_DIM, STATE_DIM + history : STATE_DIM + history + PARTNER_DIM, STATE_DIM : STATE_DIM + history
        ]
        goal = spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-np.inf, np.inf, shape=(self.contract.observation_dim,), dtype=np.float64),
                "achieved_goal": goal,
                "desired_goal": goal,
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32)
        self._cell_obs: dict[str, np.ndarray] | None = None

    def view(self, cell_obs: dict[str, np.ndarray], arm: int) -> dict[str, np.ndarray]:
        """Arm ``arm``'s observation in the package's layout, from the cell's stacked observation."""
        return {
            "observation": cell_obs["observation"][arm][self._order],
            "achieved_goal": cell_obs["achieved_goal"][arm].copy(),
            "desired_goal": cell_obs["desired_goal"][arm].copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._cell_obs, info = self.cell.reset(seed=seed, options=options)
        return self.view(self._cell_obs, self.arm), info

    def step(self, action: np.ndarray):
        both = np.zeros((N_ARMS, ACTION_DIM))
        both[self.arm] = np.asarray(action, dtype=np.float64)
        if self._partner != "hold":
            partner_flat = self.contract.flatten(self.view(self._cell_obs, 1 - self.arm))  # type: ignore[arg-type]
            both[1 - self.arm] = np.asarray(self._partner(partner_flat[None]), dtype=np.float64)[0]
        self._cell_obs, _, terminated, truncated, info = self.cell.step(both)
        obs = self.view(self._cell_obs, self.arm)
        reached = bool(info["arm_success"][self.arm]) and info["violation"] is None
        info = {**info, "team_success": info["is_success"], "is_success": np.float32(reached)}
        return obs, (0.0 if reached else -1.0), terminated, truncated, info

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """This arm's sparse reward, vectorized: 0 within the success radius, else -1."""
        return -(goal_distance(achieved_goal, desired_goal) > self.distance_threshold).astype(np.float32)

    def close(self) -> None:
        self.cell.close()

"""Multi-agent GRPO for a cell of identical agents: centralized training on the team outcome, decentralized acting.

Centralized training, decentralized execution with parameter sharing (Gupta et al. 2017, "Cooperative Multi-Agent
Control Using Deep Reinforcement Learning"; MAPPO, Yu et al. 2022, https://arxiv.org/abs/2103.01955), here
critic-free: GRPO (https://arxiv.org/abs/2402.03300) compares each arm's actions with the same arm's actions in G
rollouts of the whole cell from one snapshot, on the team's result (``robot_grpo.cell_buffer``), with hindsight per
arm on the team reward. Each agent acts on its own observation only (its row; the partner's position is part of
it), so each arm can run its own policy package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv
from stable_baselines3.common.vec_env import VecEnv

from robot_grpo.buffers import info_reward_offsets
from robot_grpo.cell_buffer import CellGroupBuffer, agent_rows
from robot_grpo.cell_policy import CellGaussianPolicy
from robot_grpo.group_reset import group_reset
from robot_grpo.grpo import GRPO
from robot_grpo.policies import OBS_KEYS

AGENT_NAMES_ATTR = "possible_agents"  # the env attribute that names the agents (PettingZoo's name for it)
VIOLATION_INFO_KEY = "violation"  # info entry that is not None once the cell's separation was violated
# ... and the entries of any failure no relabelled goal removes: a violation, an arm its runtime would have stopped
VIOLATION_INFO_KEYS = (VIOLATION_INFO_KEY, "safe_stop")


class CellGRPO(GRPO):
    """GRPO on a cell env whose observations and actions stack the agents on the first axis (``TwoArmCell-v0``).

    Every argument of :class:`GRPO` applies (``group_size`` cells per group, ``n_groups`` groups); ``n_envs`` counts
    cells, and ``total_timesteps`` counts cell steps (each moves every agent once). Besides:

    :param sharing: "heads" (one trunk, a head per agent), "agent_id" (the id as an input) or "none" (a network per
        agent); see ``robot_grpo.cell_policy``.
    :param agents: agent names, the keys of :meth:`predict`'s observation dict; None reads the env's
        ``possible_agents`` (else ``agent_0``, ``agent_1``, ...).
    :param rollout_buffer_kwargs: :class:`CellGroupBuffer` options (``hindsight``, ``hindsight_strategy``,
        ``n_sampled_goal``, ``is_correction``, ``is_clip``, ``is_self_normalize``).

    The cell must run every member to the time limit: a separation violation freezes the arms instead of ending the
    episode (``TwoArmCell-v0`` with ``end_on_violation=False``); the outcome is the same failure.
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MultiInputPolicy": CellGaussianPolicy,
        "CellPolicy": CellGaussianPolicy,
    }
    policy: CellGaussianPolicy
    rollout_buffer: CellGroupBuffer

    def __init__(
        self,
        policy: str | type[CellGaussianPolicy],
        env: GymEnv | str | None,
        sharing: str = "heads",
        agents: Sequence[str] | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        rollout_buffer_class: type[CellGroupBuffer] | None = None,
        **kwargs: Any,
    ) -> None:
        if rollout_buffer_class is not None and not issubclass(rollout_buffer_class, CellGroupBuffer):
            raise ValueError(f"CellGRPO needs a CellGroupBuffer (sub)class, got {rollout_buffer_class.__name__}")
        if kwargs.get("restart_fraction", 0.0):
            raise ValueError("CellGRPO does not support restart_fraction (mid-episode restarts); leave it at 0")
        self.sharing = sharing
        self.agents = None if agents is None else [str(a) for a in agents]
        super().__init__(
            policy,
            env,
            policy_kwargs={**(policy_kwargs or {}), "sharing": sharing},
            rollout_buffer_class=rollout_buffer_class or CellGroupBuffer,
            **kwargs,
        )

    def _setup_model(self) -> None:
        super()._setup_model()
        n_agents = self.policy.n_agents
        if self.agents is None and self.env is not None and self.env.has_attr(AGENT_NAMES_ATTR):
            self.agents = list(self.env.get_attr(AGENT_NAMES_ATTR, [0])[0])
        if self.agents is None:
            self.agents = [f"agent_{i}" for i in range(n_agents)]
        if len(self.agents) != n_agents:
            raise ValueError(f"{len(self.agents)} agent names {self.agents} for a cell of {n_agents} agents")

    # Rollouts ---------------------------------------------------------------------------------------------
    def collect_rollouts(self, env: VecEnv, callback: BaseCallback, rollout_buffer: CellGroupBuffer) -> bool:
        """One group rollout of whole cells to the time limit; every agent's row scored on its cell's team reward."""
        self.policy.set_training_mode(False)
        self._last_obs = group_reset(env, self.group_size)
        rollout_buffer.reset()
        callback.on_rollout_start()
        low, high = self.policy.action_low.cpu().numpy(), self.policy.action_high.cpu().numpy()
        T = rollout_buffer.n_steps
        for t in range(T):
            rows = rollout_buffer.rows(self._last_obs)
            with th.no_grad():
                mean, log_std = self.policy.distribution_params(th.as_tensor(rows, device=self.device))
                noise = th.randn(mean.shape, generator=self._th_gen, device=self.device)
                actions = (mean + noise * th.exp(log_std)).cpu().numpy()
            new_obs, rewards, dones, infos = env.step(rollout_buffer.to_cells(np.clip(actions, low, high)))
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            last = t == T - 1
            if not np.all(dones == last):
                raise ValueError(
                    f"every cell must run to the time limit (n_steps={T}); at step {t + 1} the done flags were "
                    f"{dones.astype(int).tolist()}. Make the cell with end_on_violation=False (a violation then "
                    "freezes the arms and the episode fails at the time limit)"
                )
            if last:
                achieved = np.stack([info["terminal_observation"]["achieved_goal"] for info in infos])
            else:
                achieved = new_obs["achieved_goal"]
            violated = np.array([any(info.get(key) is not None for key in VIOLATION_INFO_KEYS) for info in infos])
            rollout_buffer.add_cell(rows, actions, rewards, achieved, violated, info_reward_offsets(infos))
            self._last_obs = new_obs
            self._last_episode_starts = dones

        self._score_rollout(rollout_buffer, True, None)
        self._rollout_stats["rollout/violation_rate"] = float(rollout_buffer.violated[-1].mean())
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    # Acting -----------------------------------------------------------------------------------------------
    def predict(  # type: ignore[override]
        self,
        observation: dict[str, Any],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[dict[str, np.ndarray] | np.ndarray, None]:
        """Actions of every agent from its own observation.

        :param observation: PettingZoo's dict ``{agent: goal observation}`` (returns ``{agent: action}``), or the
            cell's stacked observation ``[n_agents, ...]`` / ``[n_envs, n_agents, ...]`` per key (returns actions of
            the same leading shape).
        :return: (actions, None); actions are clipped to the action bounds.
        """
        del state, episode_start
        assert self.agents is not None
        by_agent = all(name in observation for name in self.agents)
        if by_agent:
            stacked = {k: np.stack([np.asarray(observation[a][k]) for a in self.agents])[None] for k in OBS_KEYS}
        elif all(k in observation for k in OBS_KEYS):
            stacked = {k: np.asarray(observation[k]) for k in OBS_KEYS}
        else:
            raise ValueError(f"predict takes {{agent: observation}} for agents {self.agents} or the stacked cell obs")
        single = np.asarray(stacked[OBS_KEYS[1]]).ndim == 2
        if single:
            stacked = {k: v[None] for k, v in stacked.items()}
        rows = agent_rows(stacked)
        n_cells, n_agents = rows.shape[:2]
        self.policy.set_training_mode(False)
        with th.no_grad():
            flat = th.as_tensor(rows.reshape(n_cells * n_agents, -1), device=self.device)
            actions = self.policy._predict(flat, deterministic=deterministic).cpu().numpy()
        low, high = self.action_space.low[0], self.action_space.high[0]
        actions = np.clip(actions, low, high).reshape(n_cells, n_agents, -1)
        if by_agent:
            return {name: actions[0, i] for i, name in enumerate(self.agents)}, None
        return (actions[0] if single else actions), None

"""What the envs returned before SB3's VecNormalize: the units hindsight must relabel in (SB3's HER convention).

SB3's HerReplayBuffer stores the original observations and rewards (``get_original_obs``, ``get_original_reward``,
``unnormalize_obs`` for terminal observations) and normalizes when it samples. GRPO's group buffer does the same:
achieved goals stay in the env's units, so a relabelled goal is a real goal and ``compute_reward`` gets what it
expects; :meth:`EnvOriginals.normalizer` maps the stored rows to what the policy sees when the rows are built.
Without a VecNormalize every method is the identity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecNormalize

from robot_grpo.buffers import NormalizeObs
from robot_grpo.policies import OBS_KEYS, flatten_obs_np


class EnvOriginals:
    """Original observations, rewards and terminal achieved goals of a VecEnv that may sit under VecNormalize.

    :param vec_normalize: the model's VecNormalize (``BaseAlgorithm.get_vec_normalize_env()``), or None.
    :param observation_space: the model's observation space (Dict goal space or Box).
    """

    def __init__(self, vec_normalize: VecNormalize | None, observation_space: spaces.Space) -> None:
        self.vec_normalize = vec_normalize
        self.observation_space = observation_space

    def obs(self, obs: Any) -> Any:
        """The original of the observation the VecEnv just returned (from reset or step)."""
        return obs if self.vec_normalize is None else self.vec_normalize.get_original_obs()

    def rewards(self, rewards: np.ndarray) -> np.ndarray:
        """The original of the rewards the VecEnv just returned."""
        return rewards if self.vec_normalize is None else self.vec_normalize.get_original_reward()

    def terminal_achieved_goals(self, infos: list[dict[str, Any]]) -> np.ndarray:
        """Achieved goals of the terminal observations ``[n_envs, goal_dim]`` (VecNormalize normalized them in
        place; undone with ``unnormalize_obs`` as SB3 does, exact up to float32 rounding)."""
        terminal = [info["terminal_observation"] for info in infos]
        if self.vec_normalize is not None:
            terminal = [self.vec_normalize.unnormalize_obs(obs) for obs in terminal]
        return np.stack([obs["achieved_goal"] for obs in terminal])

    @property
    def normalizer(self) -> NormalizeObs | None:
        """Flat original observations [N, obs_dim] -> policy inputs (VecNormalize's current stats); None: identity."""
        return None if self.vec_normalize is None else self._normalize_flat

    def _normalize_flat(self, flat: np.ndarray) -> np.ndarray:
        assert self.vec_normalize is not None
        space = self.observation_space
        if not isinstance(space, spaces.Dict):
            return np.asarray(self.vec_normalize.normalize_obs(flat), dtype=np.float32)
        shapes = [space[key].shape for key in OBS_KEYS]
        parts = np.split(flat, np.cumsum([int(np.prod(shape)) for shape in shapes])[:-1], axis=-1)
        obs = {k: p.reshape(len(flat), *shape) for k, p, shape in zip(OBS_KEYS, parts, shapes, strict=True)}
        return flatten_obs_np(self.vec_normalize.normalize_obs(obs))

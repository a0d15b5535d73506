"""Group rollout buffers: store [T, n_envs] steps of whole-group episodes, compute group-relative advantages.

Env ``e`` belongs to group ``e // G`` (member ``e % G``), as :func:`robot_grpo.group_reset.group_reset` lays
them out. Like SB3's HER, hindsight is a buffer class (:class:`HindsightGroupBuffer`), not a flag in the
algorithm; :class:`GroupRolloutBuffer` is plain GRPO (the "no hindsight" ablation).

After :meth:`GroupRolloutBuffer.compute`, the buffer holds one flat training set: the original-goal samples
(weight 1) plus any relabelled copies (weighted), each row with its collecting-policy log-prob, its
reference-policy log-prob and its advantage. :meth:`GroupRolloutBuffer.get` yields shuffled minibatches.

Observations and achieved goals are stored as the env returned them *before* any VecNormalize (SB3's
HerReplayBuffer keeps the original observations too): hindsight relabels with goals in the env's own units and
``compute_reward`` sees them unchanged; ``compute(normalize_obs=...)`` maps the rows into what the policy sees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces

from robot_grpo.advantages import ADVANTAGE_SCALES, group_advantages
from robot_grpo.hindsight import (
    DEFAULT_N_SAMPLED_GOAL,
    HindsightConfig,
    distance_penalty,
    importance_weights,
    relabel_rewards,
    sample_group_goals,
    start_satisfied,
)
from robot_grpo.policies import GoalGaussianPolicy, flat_obs_dim

# info key under which an env reports the part of a step's reward that does not depend on the goal (e.g. a reaching
# term; envs.object_approach writes it): hindsight copies keep it when they rescore the step under another goal.
REWARD_OFFSET_KEY = "reward_offset"
SPARSE_SUCCESS_REWARD = 0.0  # gymnasium-robotics sparse convention: 0 at the goal, -1 elsewhere
LOG_PROB_CHUNK = 8192  # rows per no-grad forward pass when scoring the whole batch

ComputeReward = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]
NormalizeObs = Callable[[np.ndarray], np.ndarray]  # flat original observations [N, D] -> policy inputs [N, D]


class GroupRolloutSamples(NamedTuple):
    """One minibatch of training rows (all tensors share the leading batch dimension B)."""

    observations: th.Tensor  # [B, obs_dim] flat, OBS_KEYS order, as the policy takes them (the policy normalizes)
    actions: th.Tensor  # [B, action_dim], as sampled (before clipping to the action space)
    old_log_prob: th.Tensor  # [B], log pi_old(a | s, g) under the (possibly relabelled) goal
    ref_log_prob: th.Tensor  # [B], log pi_ref(a | s, g)
    advantages: th.Tensor  # [B]
    weights: th.Tensor  # [B], 1 for original-goal samples, the IS weight for relabelled ones


class RelabelledCopies(NamedTuple):
    """K extra copies of the rollout under other goals (produced by a hindsight buffer)."""

    observations: np.ndarray  # [K, T, n_envs, obs_dim]
    rewards: np.ndarray  # [K, T, n_groups, G]
    mask: np.ndarray  # [K, T, n_groups, 1] bool: which steps belong to the relabelled episode
    old_log_prob: np.ndarray  # [K, T, n_groups, G]
    weights: np.ndarray  # [K, T, n_groups, G]
    horizon: np.ndarray  # [K, n_groups] last valid step
    goal_rewards: np.ndarray  # [K, T, n_groups, G]: compute_reward under each goal alone (no offsets, no distance)


def minibatches(
    rows: GroupRolloutSamples, batch_size: int | None = None, generator: th.Generator | None = None
) -> Iterator[GroupRolloutSamples]:
    """Shuffled minibatches of training rows (the last one may be smaller).

    :param rows: the training rows.
    :param batch_size: rows per minibatch (None: one batch).
    :param generator: torch generator of the shuffle (None: torch's global RNG; GRPO always passes its own).
    """
    n_rows = len(rows.observations)
    batch_size = n_rows if batch_size is None else batch_size
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1 row, got {batch_size}")
    perm = th.randperm(n_rows, generator=generator, device=rows.observations.device)
    for start in range(0, n_rows, batch_size):
        idx = perm[start : start + batch_size]
        # index_select: the same rows as t[idx], gathered ~4x faster on the CPU (one core, 2,048 x 25 floats)
        yield GroupRolloutSamples(*(th.index_select(t, 0, idx) for t in rows))


@th.no_grad()
def score_log_prob(policy: GoalGaussianPolicy, obs: np.ndarray, actions: np.ndarray, device: th.device) -> np.ndarray:
    """log pi(actions | obs) for flat arrays ``[N, obs_dim]``, ``[N, action_dim]`` (chunked, no grad) -> [N]."""
    out = np.empty(len(obs), dtype=np.float32)
    for start in range(0, len(obs), LOG_PROB_CHUNK):
        stop = start + LOG_PROB_CHUNK
        o = th.as_tensor(obs[start:stop], device=device)
        a = th.tensor(actions[start:stop], device=device)  # a copy: the rows may be a read-only broadcast
        out[start:stop] = policy.log_prob(o, a).cpu().numpy()
    return out


def info_reward_offsets(infos: Sequence[dict[str, Any]]) -> np.ndarray:
    """The goal-independent reward parts the envs reported in ``info[REWARD_OFFSET_KEY]`` (0 where absent), [n]."""
    return np.array([float(info.get(REWARD_OFFSET_KEY, 0.0)) for info in infos], dtype=np.float32)


class GroupRolloutBuffer:
    """Stores ``n_steps`` steps of ``n_groups`` x ``group_size`` envs and builds GRPO training rows.

    :param n_steps: steps per episode (T); every episode of a rollout runs to this time limit.
    :param observation_space: the env's observation space (Dict goal space or Box).
    :param action_space: the env's Box action space.
    :param group_size: members per group (G).
    :param n_groups: groups per rollout.
    :param device: torch device of the training rows.
    :param gamma: discount of the returns-to-go.
    :param scale_advantages: "group" | "batch" | "none".
    :param outcome_only: score members by the episode outcome (last reward) instead of returns-to-go.
    """

    def __init__(
        self,
        n_steps: int,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        group_size: int,
        n_groups: int,
        device: th.device | str = "cpu",
        gamma: float = 0.98,
        scale_advantages: str = "group",
        outcome_only: bool = False,
    ) -> None:
        if n_steps < 1 or group_size < 1 or n_groups < 1:
            raise ValueError(f"n_steps, group_size and n_groups must be >= 1, got {n_steps}, {group_size}, {n_groups}")
        if scale_advantages not in ADVANTAGE_SCALES:  # else the first update, not the constructor, would refuse it
            raise ValueError(f"scale_advantages must be one of {ADVANTAGE_SCALES}, got {scale_advantages!r}")
        if not 0.0 <= gamma <= 1.0:  # as GRPO's own check: 0 scores each step by its own reward
            raise ValueError(f"gamma must be a discount in [0, 1], got {gamma}")
        self.n_steps = int(n_steps)
        self.observation_space = observation_space
        self.action_space = action_space
        self.group_size = int(group_size)
        self.n_groups = int(n_groups)
        self.n_envs = self.group_size * self.n_groups
        self.device = th.device(device)
        self.gamma = float(gamma)
        self.scale_advantages = scale_advantages
        self.outcome_only = bool(outcome_only)
        self.obs_dim = flat_obs_dim(observation_space)
        self.action_dim = int(np.prod(action_space.shape))
        self.goal_dim = int(np.prod(observation_space["desired_goal"].shape)) if self._is_goal_space() else 0
        self._samples: GroupRolloutSamples | None = None
        self.reset()

    def _is_goal_space(self) -> bool:
        return isinstance(self.observation_space, spaces.Dict) and "desired_goal" in self.observation_space.spaces

    def reset(self) -> None:
        T, n = self.n_steps, self.n_envs
        self.observations = np.zeros((T, n, self.obs_dim), dtype=np.float32)
        self.actions = np.zeros((T, n, self.action_dim), dtype=np.float32)
        self.rewards = np.zeros((T, n), dtype=np.float32)
        self.reward_offsets = np.zeros((T, n), dtype=np.float32)  # the goal-independent part of ``rewards``
        self.achieved_next = np.zeros((T, n, max(self.goal_dim, 1)), dtype=np.float64)
        self.pos = 0
        self._samples = None

    @property
    def full(self) -> bool:
        return self.pos == self.n_steps

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        achieved_next: np.ndarray | None,
        reward_offsets: np.ndarray | None = None,
    ) -> None:
        """Store one vectorized step.

        :param obs: flat observations before the step ``[n_envs, obs_dim]``.
        :param actions: sampled actions ``[n_envs, action_dim]``.
        :param rewards: rewards of the step ``[n_envs]``.
        :param achieved_next: achieved goal after the step ``[n_envs, goal_dim]`` (None for non-goal envs).
        :param reward_offsets: the part of ``rewards`` that does not depend on the goal ``[n_envs]`` (e.g. a
            penalty for a safety-filter intervention, or an env's ``info[REWARD_OFFSET_KEY]``); hindsight copies
            keep it. None = 0.
        """
        if self.full:
            raise ValueError(f"buffer is full ({self.n_steps} steps); call reset() before adding a new rollout")
        self.observations[self.pos] = obs
        self.actions[self.pos] = actions
        self.rewards[self.pos] = rewards
        self.reward_offsets[self.pos] = 0.0 if reward_offsets is None else reward_offsets
        if achieved_next is not None:
            self.achieved_next[self.pos] = achieved_next
        self.pos += 1

    def _grouped(self, x: np.ndarray) -> np.ndarray:
        """[T, n_envs, ...] -> [T, n_groups, G, ...]."""
        return x.reshape(self.n_steps, self.n_groups, self.group_size, *x.shape[2:])

    def _relabel(
        self,
        policy: GoalGaussianPolicy,
        compute_reward: ComputeReward | None,
        rng: np.random.Generator,
        normalize_obs: NormalizeObs | None,
    ) -> RelabelledCopies | None:
        """Hook for hindsight buffers; plain GRPO adds no copies."""
        del policy, compute_reward, rng, normalize_obs
        return None

    def _own_rewards(self) -> np.ndarray:
        """The rewards the original-goal rows are scored by, ``[T, n_groups, G]``: the env's here."""
        return self._grouped(self.rewards)

    def _original_goal_mask(self, compute_reward: ComputeReward | None) -> np.ndarray:
        """Which (step, group) cells of the original-goal rows train, ``[1, T, n_groups, 1]``: all of them here."""
        del compute_reward
        return np.ones((1, self.n_steps, self.n_groups, 1), dtype=bool)

    def _start_goals(self) -> tuple[np.ndarray, np.ndarray]:
        """Each group's achieved goal before its first action and its original goal, ``[n_groups, d]`` each
        (achieved_goal and desired_goal are the last two blocks of the flat observation; members share both)."""
        D, d = self.obs_dim, self.goal_dim
        first = self._grouped(self.observations)[0, :, 0]
        return first[:, D - 2 * d : D - d], first[:, D - d :]

    @staticmethod
    def _policy_inputs(obs: np.ndarray, normalize_obs: NormalizeObs | None) -> np.ndarray:
        """Stored observations [..., D] -> policy inputs of the same shape (identity without a normalizer)."""
        if normalize_obs is None:
            return obs
        return np.asarray(normalize_obs(obs.reshape(-1, obs.shape[-1])), dtype=np.float32).reshape(obs.shape)

    def compute(
        self,
        policy: GoalGaussianPolicy,
        ref_policy: GoalGaussianPolicy | None,
        compute_reward: ComputeReward | None,
        rng: np.random.Generator,
        normalize_obs: NormalizeObs | None = None,
    ) -> dict[str, float]:
        """Score the rollout (and its relabelled copies) and build the training rows; returns statistics.

        :param policy: the collecting policy (pi_old), its normalizer already updated with this rollout.
        :param ref_policy: the reference policy of the KL term; None when the term is off (``beta == 0``): the
            rows then carry ``ref_log_prob = 0``, which nothing reads.
        :param compute_reward: the env's vectorized ``compute_reward`` (used by hindsight buffers).
        :param rng: generator for goal sampling.
        :param normalize_obs: maps stored (original) flat observations to policy inputs, e.g. with a
            VecNormalize's statistics; None = the stored observations are the policy inputs.
        """
        if not self.full:
            raise ValueError(f"compute() needs a full rollout of {self.n_steps} steps, got {self.pos}")
        T, n, D, A = self.n_steps, self.n_envs, self.obs_dim, self.action_dim
        own_obs = self._policy_inputs(self.observations, normalize_obs)
        flat_act = self.actions.reshape(-1, A)
        self.log_prob = score_log_prob(policy, own_obs.reshape(-1, D), flat_act, self.device).reshape(T, n)
        copies = self._relabel(policy, compute_reward, rng, normalize_obs)

        rewards = self._own_rewards()[None]
        old_lp = self._grouped(self.log_prob)[None]
        weights = np.ones_like(rewards)
        mask = self._original_goal_mask(compute_reward)
        observations = own_obs[None]
        if copies is not None:
            rewards = np.concatenate([rewards, copies.rewards])
            old_lp = np.concatenate([old_lp, copies.old_log_prob])
            weights = np.concatenate([weights, copies.weights])
            mask = np.concatenate([mask, copies.mask])
            observations = np.concatenate([observations, copies.observations])
        adv = group_advantages(rewards, self.gamma, self.scale_advantages, self.outcome_only, mask)

        K = rewards.shape[0]
        keep = np.broadcast_to(mask, rewards.shape).reshape(-1)
        obs_rows = observations.reshape(-1, D)[keep]
        act_rows = np.broadcast_to(self.actions[None], (K, T, n, A)).reshape(-1, A)[keep]
        if ref_policy is None:
            ref_lp = np.zeros(len(obs_rows), dtype=np.float32)
        else:
            ref_lp = score_log_prob(ref_policy, obs_rows, act_rows, self.device)

        def to_t(x: np.ndarray) -> th.Tensor:
            return th.as_tensor(np.ascontiguousarray(x), dtype=th.float32, device=self.device)

        self._samples = GroupRolloutSamples(
            observations=to_t(obs_rows),
            actions=to_t(act_rows),
            old_log_prob=to_t(old_lp.reshape(-1)[keep]),
            ref_log_prob=to_t(ref_lp),
            advantages=to_t(adv.advantages.reshape(-1)[keep]),
            weights=to_t(weights.reshape(-1)[keep]),
        )
        stats = {
            "rollout/zero_std_groups": float(adv.zero_std_groups[0].mean()),
            "train/n_samples": float(len(obs_rows)),
        }
        if copies is not None:
            w = weights[1:][np.broadcast_to(mask[1:], weights[1:].shape)]
            k_idx, g_idx = np.indices(copies.horizon.shape)
            last_reward = copies.goal_rewards[k_idx, copies.horizon, g_idx]  # [K, n_groups, G]
            kept = copies.mask[:, 0, :, 0]  # [K, n_groups]: relabelled goals in use (step 0 is always in range)
            success = (last_reward >= SPARSE_SUCCESS_REWARD)[kept]
            stats.update(
                {
                    "hindsight/weight_mean": float(w.mean()) if w.size else 0.0,
                    "hindsight/relabelled_success": float(success.mean()) if success.size else 0.0,
                    "hindsight/zero_std_groups": float(adv.zero_std_groups[1:].mean()),
                    "hindsight/kept_goals": float(kept.mean()),
                }
            )
        return stats

    @property
    def n_samples(self) -> int:
        return 0 if self._samples is None else len(self._samples.observations)

    @property
    def samples(self) -> GroupRolloutSamples:
        """The training rows built by :meth:`compute` (what ``GRPO.train_on_samples`` takes)."""
        if self._samples is None:
            raise ValueError("call compute() first: the training rows are built from a full rollout")
        return self._samples

    def get(
        self, batch_size: int | None = None, generator: th.Generator | None = None
    ) -> Iterator[GroupRolloutSamples]:
        """Shuffled minibatches of the training rows (see :func:`minibatches`)."""
        return minibatches(self.samples, batch_size, generator)


class HindsightGroupBuffer(GroupRolloutBuffer):
    """GRPO buffer with whole-group hindsight relabelling and importance-weight correction.

    Extra parameters (pass them in ``rollout_buffer_kwargs``; see :class:`HindsightConfig`):

    :param hindsight_strategy: "final" | "future" | "episode".
    :param n_sampled_goal: relabelled goals per group.
    :param is_correction: weight relabelled samples by pi_old(a|s,g')/pi_old(a|s,g) (False: weight 1).
    :param is_clip: truncation of the weights.
    :param is_self_normalize: self-normalize the weights per time step.
    :param skip_start_goals: drop relabelled goals that the group's start already satisfies (object tasks).
    :param distance_coef: reward subtracted per metre of achieved-to-goal distance after each step (0: off).
    """

    def __init__(
        self,
        *args: Any,
        hindsight_strategy: str = "final",
        n_sampled_goal: int = DEFAULT_N_SAMPLED_GOAL,
        is_correction: bool = True,
        is_clip: float = 1.0,
        is_self_normalize: bool = False,
        skip_start_goals: bool = False,
        distance_coef: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if not self._is_goal_space():
            raise ValueError(
                "HindsightGroupBuffer needs a Dict goal observation space with 'desired_goal'; "
                "use rollout_buffer_class=GroupRolloutBuffer for other envs"
            )
        self.hindsight = HindsightConfig(
            hindsight_strategy,
            n_sampled_goal,
            is_correction,
            is_clip,
            is_self_normalize,
            skip_start_goals,
            distance_coef,
        )

    def _own_rewards(self) -> np.ndarray:
        """The env's rewards plus the distance term under each step's own desired goal."""
        rewards = super()._own_rewards()
        if self.hindsight.distance_coef == 0:
            return rewards
        goal = self._grouped(self.observations)[..., self.obs_dim - self.goal_dim :]  # desired_goal: the last block
        return rewards + distance_penalty(self._grouped(self.achieved_next), goal, self.hindsight.distance_coef)

    def _original_goal_mask(self, compute_reward: ComputeReward | None) -> np.ndarray:
        """With ``skip_start_goals`` a group whose own goal is satisfied at the start does not train on it either:
        leaving the object alone is all it can teach, and that spreads to objects that should be pushed."""
        mask = super()._original_goal_mask(compute_reward)
        if self.hindsight.skip_start_goals and compute_reward is not None:
            start, goal = self._start_goals()
            trivial = start_satisfied(compute_reward, start, goal[None], SPARSE_SUCCESS_REWARD)[0]  # [n_groups]
            mask = mask & ~trivial[None, None, :, None]
        return mask

    def _relabel(
        self,
        policy: GoalGaussianPolicy,
        compute_reward: ComputeReward | None,
        rng: np.random.Generator,
        normalize_obs: NormalizeObs | None,
    ) -> RelabelledCopies:
        if compute_reward is None:
            raise ValueError("hindsight relabelling needs the env's vectorized compute_reward")
        cfg = self.hindsight
        T, n, D, A, d = self.n_steps, self.n_envs, self.obs_dim, self.action_dim, self.goal_dim
        K = cfg.n_sampled_goal
        achieved = self._grouped(self.achieved_next)
        goals, horizon = sample_group_goals(achieved, cfg.strategy, K, rng)
        goal_rewards = relabel_rewards(compute_reward, achieved, goals)
        rewards = goal_rewards + self._grouped(self.reward_offsets)[None]
        if cfg.distance_coef > 0:
            rewards = rewards + distance_penalty(achieved[None], goals[:, None, :, None, :], cfg.distance_coef)
        mask = (np.arange(T)[None, :, None] <= horizon[:, None, :])[..., None]  # [K, T, n_groups, 1]
        if cfg.skip_start_goals:
            start, _ = self._start_goals()
            trivial = start_satisfied(compute_reward, start, goals, SPARSE_SUCCESS_REWARD)
            mask = mask & ~trivial[:, None, :, None]

        obs = np.broadcast_to(self._grouped(self.observations)[None], (K, T, self.n_groups, self.group_size, D)).copy()
        obs[..., D - d :] = goals[:, None, :, None, :]  # desired_goal is the last block of the flat observation
        obs = self._policy_inputs(obs.reshape(K, T, n, D), normalize_obs)
        actions = np.broadcast_to(self.actions[None], (K, T, n, A)).reshape(-1, A)
        log_prob = score_log_prob(policy, obs.reshape(-1, D), actions, self.device).reshape(
            K, T, self.n_groups, self.group_size
        )
        if cfg.is_correction:
            weights = importance_weights(
                log_prob, self._grouped(self.log_prob), mask, cfg.is_clip, cfg.is_self_normalize
            )
        else:
            weights = np.broadcast_to(mask, log_prob.shape).astype(np.float32)
        return RelabelledCopies(obs, rewards, mask, log_prob, weights, horizon, goal_rewards)

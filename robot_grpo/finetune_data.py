"""Fine-tuning data from logged robot episodes: cut, group by target, feed the GRPO hindsight buffer.

Pure numpy/torch: this module takes arrays (the caller reads the tick log); it knows no file format, env or
deploy code. The GRPO machinery is reused, not rewritten: groups go into
:class:`robot_grpo.buffers.HindsightGroupBuffer` (returns-to-go, group advantages, whole-group hindsight with
importance weights), whose ``compute`` scores the data under the *deployed* policy (the collecting policy,
pi_old) and the reference policy of the KL term (also the deployed one).

Episode layout (one logged episode of N ticks, flat observations in the contract order
``[observation, achieved_goal, desired_goal]``): the action of tick t moves the robot to the state seen at tick
t + 1, so an episode yields N - 1 transitions::

    observations[t]  = obs_flat[t]                                t = 0 .. N-2
    actions[t]       = action[t]        (the logged action GRPO trains on: by default the command the safety
                                         filter sent, see deploy.finetune.dataset)
    achieved_next[t] = obs_flat[t + 1, achieved_goal slice]
    goal             = obs_flat[0, desired_goal slice]

Groups. A production line repeats its targets, and every episode starts from the home pose, so attempts at
the same target (within ``goal_tolerance_m``) are a natural GRPO group: same start, same goal. Clusters are cut
into groups of ``group_size`` attempts. The rest (targets seen fewer than ``group_size`` times) still share the
start but not the goal: they are packed into *hindsight-only* groups that train only on their relabelled
copies (every member relabelled with one goal achieved inside the group, importance-weighted by
pi(a|s,g')/pi(a|s,g_i)); their original-goal rows are dropped because members chased different goals.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

from robot_grpo.buffers import ComputeReward, GroupRolloutBuffer, GroupRolloutSamples, HindsightGroupBuffer
from robot_grpo.policies import GoalGaussianPolicy

DEFAULT_GOAL_TOLERANCE_M = 0.01  # targets closer than 1 cm count as the same target


class NoCompleteGroupError(ValueError):
    """The logs hold no target attempted ``group_size`` times: nothing to compare within a group (bad input, not a
    bug: the CLI reports it in one line)."""


@dataclass(frozen=True)
class LoggedEpisode:
    """One episode cut from a log (see the module docstring for the layout).

    :param episode_id: the runtime's episode id.
    :param observations: flat observations before each action, float32 [T, obs_dim].
    :param actions: the logged actions trained on (sent by the filter, or proposed), float32 [T, action_dim].
    :param achieved_next: achieved goal after each action, float64 [T, goal_dim] (metres).
    :param goal: the target, float64 [goal_dim] (metres).
    :param interventions: safety-filter interventions during the episode (ticks with a reason).
    :param intervened: whether the safety filter changed each transition's action, bool [T] (None = unknown).
    """

    episode_id: int
    observations: np.ndarray
    actions: np.ndarray
    achieved_next: np.ndarray
    goal: np.ndarray
    interventions: int = 0
    intervened: np.ndarray | None = None

    @property
    def n_steps(self) -> int:
        return int(self.observations.shape[0])


def episode_from_ticks(
    episode_id: int,
    obs_flat: np.ndarray,
    actions: np.ndarray,
    goal_dim: int,
    interventions: int = 0,
    intervened: np.ndarray | None = None,
) -> LoggedEpisode:
    """Cut one episode's ticks (in tick order) into transitions.

    :param obs_flat: flat observations of the N ticks, [N, obs_dim] (``[observation, achieved, desired]``).
    :param actions: the action logged at each tick (sent or proposed), [N, action_dim].
    :param goal_dim: length of the achieved / desired goal blocks at the end of ``obs_flat``.
    :param interventions: safety-filter interventions during the episode.
    :param intervened: whether the safety filter changed each tick's action, bool [N] (None = unknown).
    """
    obs_flat = np.asarray(obs_flat, dtype=np.float32)
    actions = np.asarray(actions, dtype=np.float32)
    if obs_flat.ndim != 2 or actions.ndim != 2 or len(obs_flat) != len(actions):
        raise ValueError(
            f"episode {episode_id}: obs_flat {obs_flat.shape} and actions {actions.shape} must be [N, D] and "
            "[N, A] with the same number of ticks"
        )
    if len(obs_flat) < 2:
        raise ValueError(f"episode {episode_id} has {len(obs_flat)} tick(s); a transition needs two")
    if intervened is not None:
        intervened = np.asarray(intervened, dtype=bool)
        if intervened.shape != (len(obs_flat),):
            raise ValueError(
                f"episode {episode_id}: intervened has shape {intervened.shape}, expected one flag per tick "
                f"({len(obs_flat)},)"
            )
        intervened = intervened[:-1].copy()
    if obs_flat.shape[1] <= 2 * goal_dim:
        raise ValueError(f"obs_flat has {obs_flat.shape[1]} values, too few for two goal blocks of {goal_dim}")
    dim = obs_flat.shape[1]
    achieved = slice(dim - 2 * goal_dim, dim - goal_dim)
    desired = slice(dim - goal_dim, dim)
    goals = obs_flat[:, desired]
    bad_goal = np.flatnonzero(~np.all(np.isfinite(goals), axis=1))
    if bad_goal.size:
        raise ValueError(
            f"episode {episode_id}: the desired goal is NaN or inf at tick(s) {bad_goal.tolist()}; drop the "
            "episode (deploy.finetune.dataset skips episodes with non-finite values)"
        )
    if not np.allclose(goals, goals[0], atol=1e-6):
        raise ValueError(f"episode {episode_id}: the desired goal changes inside the episode; cut episodes by target")
    return LoggedEpisode(
        episode_id=int(episode_id),
        observations=obs_flat[:-1].copy(),
        actions=actions[:-1].copy(),
        achieved_next=obs_flat[1:, achieved].astype(np.float64),
        goal=goals[0].astype(np.float64),
        interventions=int(interventions),
        intervened=intervened,
    )


@dataclass
class GroupedEpisodes:
    """Episodes arranged for GRPO: ``groups`` share a target, ``hindsight_groups`` only share the start."""

    groups: list[list[LoggedEpisode]] = field(default_factory=list)
    hindsight_groups: list[list[LoggedEpisode]] = field(default_factory=list)
    dropped_short: int = 0  # episodes shorter than n_steps (e.g. stopped by the safety filter)
    dropped_unmatched: int = 0  # left over after packing into groups of group_size
    dropped_nonfinite: int = 0  # episodes with NaN / inf observations, actions, achieved goals or goal

    def stats(self) -> dict[str, float]:
        return {
            "finetune/target_groups": float(len(self.groups)),
            "finetune/hindsight_groups": float(len(self.hindsight_groups)),
            "finetune/dropped_short": float(self.dropped_short),
            "finetune/dropped_unmatched": float(self.dropped_unmatched),
            "finetune/dropped_nonfinite": float(self.dropped_nonfinite),
        }


def group_by_target(
    episodes: Sequence[LoggedEpisode],
    group_size: int,
    n_steps: int,
    goal_tolerance_m: float = DEFAULT_GOAL_TOLERANCE_M,
) -> GroupedEpisodes:
    """Cluster episodes by target (greedy, in episode order, Euclidean distance to the cluster's first target).

    Episodes are truncated to ``n_steps`` transitions; shorter ones and those with a NaN / inf value in the used
    transitions (observations, actions, achieved goals, goal) are dropped (counted).
    Each cluster gives ``len // group_size`` target groups; the leftovers of all clusters are packed, in order,
    into hindsight-only groups of ``group_size``; what remains after that is dropped (counted).
    """
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 attempts (a group of one has no baseline), got {group_size}")
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1 control step, got {n_steps}")
    if not goal_tolerance_m >= 0:
        raise ValueError(f"goal_tolerance_m must be >= 0 metres, got {goal_tolerance_m}")
    out = GroupedEpisodes()
    clusters: list[tuple[np.ndarray, list[LoggedEpisode]]] = []
    for ep in sorted(episodes, key=lambda e: e.episode_id):
        if ep.n_steps < n_steps:
            out.dropped_short += 1
            continue
        ep = _truncate(ep, n_steps)
        if not _all_finite(ep):  # a NaN achieved goal would score as a success under a sparse reward
            out.dropped_nonfinite += 1
            continue
        for target, members in clusters:
            if np.linalg.norm(ep.goal - target) <= goal_tolerance_m:
                members.append(ep)
                break
        else:
            clusters.append((ep.goal, [ep]))
    rest: list[LoggedEpisode] = []
    for _, members in clusters:
        n_full = len(members) // group_size
        out.groups += [members[i * group_size : (i + 1) * group_size] for i in range(n_full)]
        rest += members[n_full * group_size :]
    n_rest = len(rest) // group_size
    out.hindsight_groups = [rest[i * group_size : (i + 1) * group_size] for i in range(n_rest)]
    out.dropped_unmatched = len(rest) - n_rest * group_size
    return out


def _all_finite(ep: LoggedEpisode) -> bool:
    """Whether the observations, actions, achieved goals and goal the rows are built from are all finite."""
    return all(np.all(np.isfinite(a)) for a in (ep.observations, ep.actions, ep.achieved_next, ep.goal))


def _truncate(ep: LoggedEpisode, n_steps: int) -> LoggedEpisode:
    if ep.n_steps == n_steps:
        return ep
    return LoggedEpisode(
        ep.episode_id,
        ep.observations[:n_steps],
        ep.actions[:n_steps],
        ep.achieved_next[:n_steps],
        ep.goal,
        ep.interventions,
        None if ep.intervened is None else ep.intervened[:n_steps],
    )


# Feeding the GRPO buffer ------------------------------------------------------------------------------------
def goal_spaces(obs_dim: int, goal_dim: int, action_dim: int) -> tuple[spaces.Dict, spaces.Box]:
    """The Dict goal observation space and Box action space the buffers expect, from flat dimensions."""
    inner = obs_dim - 2 * goal_dim
    if inner < 1:
        raise ValueError(f"flat obs_dim {obs_dim} is too small for two goal blocks of {goal_dim}")
    box = spaces.Box(-np.inf, np.inf, shape=(goal_dim,), dtype=np.float64)
    observation_space = spaces.Dict(
        {
            "observation": spaces.Box(-np.inf, np.inf, shape=(inner,), dtype=np.float64),
            "achieved_goal": box,
            "desired_goal": box,
        }
    )
    return observation_space, spaces.Box(-1.0, 1.0, shape=(action_dim,), dtype=np.float32)


class LogGroupBuffer(HindsightGroupBuffer):
    """A hindsight group buffer filled from logged groups rather than from env rollouts.

    :param hindsight_only: drop the original-goal rows after ``compute`` (for groups whose members chased
        different targets: only their relabelled copies share one goal). This is the one adapter over the
        GRPO buffer: it trims the training rows ``compute`` built.
    Other parameters: as :class:`HindsightGroupBuffer`.
    """

    def __init__(self, *args: Any, hindsight_only: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hindsight_only = bool(hindsight_only)

    def fill(
        self,
        groups: Sequence[Sequence[LoggedEpisode]],
        compute_reward: ComputeReward,
        intervention_penalty: float = 0.0,
    ) -> None:
        """Add the groups step by step, rewards from ``compute_reward(achieved_next, goal)`` minus
        ``intervention_penalty`` at every transition whose action the safety filter changed (a goal-independent
        part of the reward: the hindsight copies keep it)."""
        if len(groups) != self.n_groups or any(len(g) != self.group_size for g in groups):
            raise ValueError(f"need {self.n_groups} groups of {self.group_size} episodes to fill this buffer")
        members = [ep for group in groups for ep in group]  # env index e = group * G + member
        obs = np.stack([ep.observations[: self.n_steps] for ep in members], axis=1)  # [T, n_envs, D]
        actions = np.stack([ep.actions[: self.n_steps] for ep in members], axis=1)
        achieved = np.stack([ep.achieved_next[: self.n_steps] for ep in members], axis=1)
        goals = np.broadcast_to(np.stack([ep.goal for ep in members])[None], achieved.shape)
        rewards = np.asarray(
            compute_reward(achieved.reshape(-1, self.goal_dim), goals.reshape(-1, self.goal_dim), None),
            dtype=np.float32,
        ).reshape(self.n_steps, self.n_envs)
        offsets = np.zeros_like(rewards)
        if intervention_penalty:
            offsets -= intervention_penalty * np.stack([intervened_flags(ep, self.n_steps) for ep in members], axis=1)
        self.reset()
        for t in range(self.n_steps):
            self.add(obs[t], actions[t], rewards[t] + offsets[t], achieved[t], reward_offsets=offsets[t])

    def compute(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        stats = super().compute(*args, **kwargs)
        if self.hindsight_only and self._samples is not None:
            n_original = self.n_steps * self.n_envs  # compute() puts the original-goal rows first
            self._samples = GroupRolloutSamples(*(t[n_original:] for t in self._samples))
            stats["train/n_samples"] = float(self.n_samples)
        return stats


def check_intervention_penalty(penalty: float) -> None:
    """Refuse an intervention penalty that is not a finite reward >= 0."""
    if not (np.isfinite(penalty) and penalty >= 0):
        raise ValueError(f"intervention_penalty must be a finite reward >= 0, got {penalty}")


# Buffer options build_finetune_samples sets itself (from the groups and the model), so hindsight_kwargs may not.
_SET_BY_FINETUNE = frozenset(
    {"n_steps", "observation_space", "action_space", "group_size", "n_groups", "device", "gamma", "hindsight_only"}
)


def hindsight_buffer_options() -> tuple[str, ...]:
    """The keyword options ``hindsight_kwargs`` may set: those of :class:`HindsightGroupBuffer` and its base
    :class:`GroupRolloutBuffer`, less the ones :func:`build_finetune_samples` sets itself (sorted)."""
    names: set[str] = set()
    for cls in (HindsightGroupBuffer, GroupRolloutBuffer):
        for param in inspect.signature(cls.__init__).parameters.values():
            if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY) and param.name != "self":
                names.add(param.name)
    return tuple(sorted(names - _SET_BY_FINETUNE))


def check_hindsight_kwargs(hindsight_kwargs: Mapping[str, Any] | None) -> None:
    """Refuse hindsight buffer options the buffer does not take (e.g. a misspelt key), naming the allowed ones, and
    values it refuses (a strategy it does not know, ``is_clip: 0``, ...): the buffer's own checks run on a one-step
    buffer now, not at the end of a round's data collection."""
    allowed = hindsight_buffer_options()
    unknown = sorted(set(hindsight_kwargs or {}) - set(allowed))
    if unknown:
        raise ValueError(
            f"unknown hindsight buffer option(s) {unknown} in hindsight_kwargs; allowed keys: {', '.join(allowed)}"
        )
    box = spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)
    goal_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
    try:
        HindsightGroupBuffer(1, goal_space, box, 1, 1, **dict(hindsight_kwargs or {}))
    except (ValueError, TypeError) as err:
        raise ValueError(f"hindsight_kwargs {dict(hindsight_kwargs or {})} refused: {err}") from None


def intervened_flags(ep: LoggedEpisode, n_steps: int) -> np.ndarray:
    """An episode's per-transition intervention flags as float32 [n_steps]; refuses an episode logged without
    them (a penalty needs to know where the filter stepped in)."""
    if ep.intervened is None:
        raise ValueError(
            f"episode {ep.episode_id} has no per-tick intervention flags; an intervention penalty needs episodes "
            "read from a tick log (deploy.finetune.dataset), or set intervention_penalty to 0"
        )
    return ep.intervened[:n_steps].astype(np.float32)


def build_finetune_samples(
    grouped: GroupedEpisodes,
    deployed: GoalGaussianPolicy,
    compute_reward: ComputeReward,
    rng: np.random.Generator,
    gamma: float = 0.98,
    hindsight_kwargs: dict[str, Any] | None = None,
    intervention_penalty: float = 0.0,
) -> tuple[GroupRolloutSamples, dict[str, float]]:
    """Score the grouped episodes under the deployed policy (pi_old and the KL reference) and build the rows
    (what ``GRPO.train_on_samples`` takes).

    :param grouped: from :func:`group_by_target`.
    :param deployed: the policy that collected the logs (it is both pi_old and the reference policy).
    :param compute_reward: the task's vectorized reward ``(achieved [N, d], desired [N, d], info) -> [N]``.
    :param rng: generator for the hindsight goal draws.
    :param gamma: discount of the returns-to-go.
    :param hindsight_kwargs: extra :class:`HindsightGroupBuffer` options (strategy, n_sampled_goal, ...).
    :param intervention_penalty: reward subtracted at each transition whose action the safety filter changed
        (>= 0; 0 = the task's reward only). Members that lean on the filter score below those that do not.
    """
    check_intervention_penalty(intervention_penalty)
    check_hindsight_kwargs(hindsight_kwargs)
    sets = [(grouped.groups, False), (grouped.hindsight_groups, True)]
    if not grouped.groups and not grouped.hindsight_groups:
        raise NoCompleteGroupError(
            "no complete group in the logs: log more episodes (each target attempted group_size times), "
            "lower group_size, or widen goal_tolerance_m"
        )
    some = (grouped.groups or grouped.hindsight_groups)[0][0]
    n_steps, obs_dim = some.observations.shape
    obs_space, act_space = goal_spaces(obs_dim, some.goal.shape[0], some.actions.shape[1])
    parts: list[GroupRolloutSamples] = []
    stats = grouped.stats()
    for groups, hindsight_only in sets:
        if not groups:
            continue
        buffer = LogGroupBuffer(
            n_steps,
            obs_space,
            act_space,
            group_size=len(groups[0]),
            n_groups=len(groups),
            device=deployed.device,
            gamma=gamma,
            hindsight_only=hindsight_only,
            **(hindsight_kwargs or {}),
        )
        buffer.fill(groups, compute_reward, intervention_penalty)
        prefix = "finetune/hindsight_only_" if hindsight_only else "finetune/target_"
        for key, value in buffer.compute(deployed, deployed, compute_reward, rng).items():
            stats[prefix + key.replace("/", "_")] = value
        parts.append(buffer.samples)
    rows = GroupRolloutSamples(*(th.cat(tensors) for tensors in zip(*parts, strict=True)))
    stats["finetune/n_samples"] = float(len(rows.observations))
    return rows, stats


# The fine-tuning driver ------------------------------------------------------------------------------------
def finetune_on_samples(
    model: Any,
    samples: GroupRolloutSamples,
    n_updates: int,
    extra_loss_terms: Sequence[Any] = (),
    sim_every: int = 0,
    generator: th.Generator | None = None,
) -> dict[str, float]:
    """Run ``n_updates`` GRPO updates (``model.train_on_samples``, ``n_epochs`` passes each) on the logged rows.

    The rows were scored under the deployed policy, so the clipped ratio keeps every update within a trust
    region of the deployed policy, and the deployed policy is the KL reference: the model's reference policy is set
    to its current weights once (``reset_reference``) and ``train_on_samples`` never refreshes it. Through the
    model's public methods only: its buffer, loss terms and settings are left as they were.

    :param model: a :class:`robot_grpo.grpo.GRPO` holding the deployed policy's weights.
    :param samples: from :func:`build_finetune_samples`.
    :param n_updates: number of updates over the rows.
    :param extra_loss_terms: loss terms with ``name`` and ``__call__(policy)`` (e.g. an EWC penalty), in every
        update of this call, sim updates included.
    :param sim_every: after every ``sim_every`` log updates also run one update on a fresh sim group rollout of the
        model's own env (``model.rollout_samples()``); 0 = logs only.
    :param generator: torch generator of the minibatch order (None: the model's own, seeded with its ``seed``).
    :return: the last log update's ``train/...`` values (including ``train/extra/<term name>``).
    """
    if n_updates < 1:
        raise ValueError(f"n_updates must be >= 1, got {n_updates}")
    if sim_every < 0:
        raise ValueError(f"sim_every must be >= 0 (0 = logs only), got {sim_every}")
    model.reset_reference()
    last: dict[str, float] = {}
    for update in range(n_updates):
        last = model.train_on_samples(samples, extra_loss_terms, generator)
        if sim_every and (update + 1) % sim_every == 0:
            model.train_on_samples(model.rollout_samples(), extra_loss_terms, generator)
    return last

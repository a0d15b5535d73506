"""The rollout worker: a Ray actor (one CPU) that owns a :class:`GroupRunner` and plays the groups it is sent.

The learner ships the policy's architecture once (:class:`PolicySpec`) and its weights once per update (one
``ray.put``); a worker fetches the weights of an update the first time one of its groups needs them and keeps
them for the update's other groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

from robot_grpo.policies import GoalGaussianPolicy
from robot_grpo.scale.group_runner import EnvFactory, GroupRollout, GroupRunner

Weights = dict[str, np.ndarray]


def _no_learning_rate(progress_remaining: float) -> float:
    """Workers never step an optimizer; the policy constructor still wants a schedule."""
    del progress_remaining
    return 0.0


@dataclass(frozen=True)
class PolicySpec:
    """What a worker needs to build the learner's policy (weights come separately, per update)."""

    policy_class: type[GoalGaussianPolicy]
    observation_space: spaces.Space
    action_space: spaces.Box
    policy_kwargs: dict[str, Any]

    def build(self) -> GoalGaussianPolicy:
        policy = self.policy_class(self.observation_space, self.action_space, _no_learning_rate, **self.policy_kwargs)
        policy.set_training_mode(False)
        return policy


def policy_weights(policy: GoalGaussianPolicy) -> Weights:
    """The policy's state dict (weights and normalizer statistics) as numpy arrays, for the object store."""
    return {k: v.detach().cpu().numpy().copy() for k, v in policy.state_dict().items()}


class RolloutWorker:
    """Plays whole groups on its own envs (wrap with ``ray.remote`` to make it an actor).

    :param env_factory: builds one env on this worker (picklable: shipped by the composition root).
    :param group_size: members per group (G): the worker owns G envs.
    """

    def __init__(self, env_factory: EnvFactory, group_size: int) -> None:
        th.set_num_threads(1)  # one CPU per worker; small MLPs run fastest on one thread
        self.runner = GroupRunner(env_factory, group_size)
        self._policy: GoalGaussianPolicy | None = None
        self._spec_id: str | None = None
        self._weights_version: int | None = None

    def ready(self) -> int:
        """Returns the group size once the envs are built (the pool waits on it so env errors surface early)."""
        return self.runner.group_size

    def node_id(self) -> str:
        """The Ray node this worker runs on (diagnostics, placement tests)."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def run_group(
        self,
        spec_box: list[Any],
        spec_id: str,
        weights_box: list[Any],
        weights_version: int,
        seed: int,
        update: int,
        group: int,
        n_steps: int,
    ) -> GroupRollout:
        """Play one group with the weights of ``weights_version``.

        The spec and weights come boxed in one-element lists of object refs, so Ray does not fetch them for
        every call: the worker fetches them when their id or version changes.
        """
        import ray

        if self._policy is None or spec_id != self._spec_id:
            self._policy = ray.get(spec_box[0]).build()
            self._spec_id, self._weights_version = spec_id, None
        if weights_version != self._weights_version:
            weights = ray.get(weights_box[0])
            self._policy.load_state_dict({k: th.as_tensor(v) for k, v in weights.items()})
            self._weights_version = weights_version
        return self.runner.run(self._policy, seed, update, group, n_steps)

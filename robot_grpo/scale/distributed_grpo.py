"""GRPO whose group rollouts run on Ray actors: same algorithm, same buffer, rollouts from a worker pool.

The learner keeps one local env (spaces, episode length, the vectorized ``compute_reward`` for hindsight); the
``group_size * n_groups`` envs of a rollout live on the workers of a :class:`RolloutWorkerPool`. Per update the
learner puts its weights in the object store once, the pool returns every group's arrays, and the learner fills
the same :class:`~robot_grpo.buffers.GroupRolloutBuffer` the threaded path fills; training is GRPO's own.

Random streams come from (seed, update, group, member) (:mod:`robot_grpo.scale.streams`), so any number of
workers - and any worker deaths along the way - train to bit-identical weights. They are not the threaded path's
streams (that path draws all envs' noise from one generator, step by step), so a Ray run and a threaded run with
the same seed are equally good samples of GRPO, not the same weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from robot_grpo.buffers import GroupRolloutBuffer
from robot_grpo.grpo import GRPO
from robot_grpo.policies import GoalGaussianPolicy
from robot_grpo.scale.group_runner import GroupRollout
from robot_grpo.scale.pool import NoRolloutWorkersError, RolloutWorkerPool
from robot_grpo.scale.worker import PolicySpec, policy_weights

STREAM_SEED_BITS = 63  # a seed drawn for seed=None fits an int64 (saved in the checkpoint)


class DistributedGRPO(GRPO):
    """GRPO with whole-group rollouts on a pool of Ray rollout workers.

    Takes every :class:`~robot_grpo.grpo.GRPO` argument except ``env`` (the pool's factory builds the learner's
    one local env). Its checkpoints are plain GRPO checkpoints: load them with ``GRPO.load`` (export, eval and
    fine-tuning take them as they are).

    :param policy: "MultiInputPolicy", "MlpPolicy" or a policy class.
    :param workers: the rollout workers; their ``group_size`` must equal this model's.
    :param checkpoint_on_failure: where to save the model (the weights of the last completed update) when no
        worker is left; None saves nothing.
    :param kwargs: GRPO's arguments (group_size, n_groups, learning_rate, ..., seed).
    """

    def __init__(
        self,
        policy: str | type[GoalGaussianPolicy],
        workers: RolloutWorkerPool,
        checkpoint_on_failure: str | None = None,
        **kwargs: Any,
    ) -> None:
        if "env" in kwargs or "_init_setup_model" in kwargs:
            raise TypeError("DistributedGRPO builds its env from workers.env_factory; do not pass env")
        if kwargs.get("restart_fraction", 0.0):
            raise ValueError(
                "restart_fraction is not supported on Ray workers (their groups start from fresh resets); train with "
                "GRPO on a local VecEnv, or leave restart_fraction at 0"
            )
        super().__init__(policy, DummyVecEnv([workers.env_factory]), _init_setup_model=False, **kwargs)
        if workers.group_size != self.group_size:
            raise ValueError(
                f"the workers run groups of {workers.group_size} but group_size is {self.group_size}; "
                f"build the pool with RolloutWorkerPool(..., group_size={self.group_size})"
            )
        self.workers = workers
        self.checkpoint_on_failure = checkpoint_on_failure
        self.n_envs = self.group_size * self.n_groups  # env slots per rollout, all on the workers
        seed = self.seed if self.seed is not None else np.random.SeedSequence().entropy
        self.stream_seed = int(seed) % (1 << STREAM_SEED_BITS)
        self._setup_model()

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "workers", "checkpoint_on_failure"]

    @classmethod
    def load(cls, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise TypeError(
            "DistributedGRPO checkpoints are GRPO checkpoints: load them with robot_grpo.GRPO.load(path); "
            "to train on Ray again, build a DistributedGRPO and model.set_parameters(path)"
        )

    def collect_rollouts(self, env: VecEnv, callback: BaseCallback, rollout_buffer: GroupRolloutBuffer) -> bool:
        """Run the rollout's groups on the workers, then fill the buffer as the threaded path does, step by step.

        The callback sees one ``on_step`` per vectorized step (``n_envs`` env steps each), after the workers
        returned, so step counts and early stops match the threaded path.

        :return: False when a callback asked to stop training.
        """
        del env  # the envs of a rollout live on the workers
        self.policy.set_training_mode(False)
        rollout_buffer.reset()
        callback.on_rollout_start()
        groups = self._collect_groups()
        T = rollout_buffer.n_steps
        observations = np.concatenate([g.observations for g in groups], axis=1)  # [T, n_envs, obs_dim]
        actions = np.concatenate([g.actions for g in groups], axis=1)
        rewards = np.concatenate([g.rewards for g in groups], axis=1)
        offsets = np.concatenate([g.reward_offsets for g in groups], axis=1)
        is_goal = groups[0].achieved_next is not None
        achieved = np.concatenate([g.achieved_next for g in groups], axis=1) if is_goal else None
        dones = np.zeros(self.n_envs, dtype=bool)
        for t in range(T):
            rollout_buffer.add(
                observations[t], actions[t], rewards[t], None if achieved is None else achieved[t], offsets[t]
            )
            self.num_timesteps += self.n_envs
            dones[:] = t == T - 1
            callback.update_locals(locals())
            if not callback.on_step():
                return False
        infos: list[dict[str, Any]] = [{"episode": {"r": float(r), "l": T}} for r in rewards.sum(axis=0)]
        successes = np.concatenate([g.successes for g in groups])
        if len(successes) == len(infos):  # envs that report is_success
            for info, success in zip(infos, successes, strict=True):
                info["is_success"] = success
        self._update_info_buffer(infos, dones)
        self._score_rollout(rollout_buffer, is_goal, None)  # the workers' envs: no VecNormalize
        stats = self.workers.last_stats
        self._rollout_stats.update(
            {
                "scale/workers_alive": float(self.workers.n_alive),
                "scale/groups_rerun": float(stats.groups_rerun),
                "scale/collect_s": stats.wall_s,
            }
        )
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _collect_groups(self) -> list[GroupRollout]:
        assert self.n_steps is not None
        try:
            return self.workers.collect(
                PolicySpec(self.policy_class, self.observation_space, self.action_space, self.policy_kwargs),
                policy_weights(self.policy),
                self.stream_seed,
                self._n_updates,
                self.n_groups,
                self.n_steps,
            )
        except NoRolloutWorkersError as err:
            if self.checkpoint_on_failure is None:
                raise
            self.save(self.checkpoint_on_failure)
            raise NoRolloutWorkersError(
                f"{err}. The weights of the last completed update ({self._n_updates} updates, "
                f"{self.num_timesteps} env steps) are saved in {self.checkpoint_on_failure} (a GRPO checkpoint)"
            ) from err

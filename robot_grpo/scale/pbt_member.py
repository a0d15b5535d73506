"""One member of a PBT population: a GRPO learner as a Ray Tune Trainable, checkpointed through Tune.

Each Tune step trains ``interval_timesteps`` env steps, evaluates the deterministic policy (the PBT score) and
reports the member's action law on the probe states (for the population's diversity figure). A member that PBT
tells to copy another loads that member's checkpoint (weights, optimizer, counters) into its own group layout
and reseeds, so it explores with its own noise from there on; its weights are then perturbed until its action law is
``min_pair_js`` away from the donor's (:mod:`robot_grpo.scale.weight_perturbation`), so it is not a copy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from ray import tune
from stable_baselines3.common.vec_env import VecEnv

from robot_grpo.grpo import GRPO
from robot_grpo.scale.weight_perturbation import perturb_until_distinct

MUTATED = ("learning_rate", "clip_range", "group_size", "ent_coef")
METRIC = "success"  # deterministic success rate of a member's policy, 0..1
MODEL_FILE = "model.zip"
MEMBER_FILE = "member.json"

# (mutated hyperparameters, seed, envs to reuse if they fit or None) -> a new GRPO on its envs. Give every member
# the same env steps per update (e.g. n_groups = envs / group_size): PBT ranks members after equal env steps, and
# the per-interval log groups the members' results by Tune iteration.
ModelBuilder = Callable[[dict[str, Any], int, VecEnv | None], GRPO]
Evaluator = Callable[[GRPO], float]  # a model -> its deterministic success rate


def member_index(trial_id: str) -> int:
    """A member's place in the population (0..N-1), the same in every run of one config.

    Tune names a trial ``<prefix>_<index>``: the prefix is random per run (uuid1), the index counts the trials
    in the order they were created. Seeding by the whole id made every run draw other seeds.
    """
    _, _, index = trial_id.rpartition("_")
    if not index.isdigit():
        raise ValueError(
            f"trial id {trial_id!r} does not end in '_<index>' as Ray Tune's trial ids do; "
            "the population cannot give its members reproducible seeds with this Ray version"
        )
    return int(index)


def member_seed(base_seed: int, trial_id: str, iteration: int) -> int:
    """A member's seed for one interval: its own exploration noise and env starts, also after it copied another.

    It depends on the member's index and not on the run's random trial-id prefix, so a run repeats.
    """
    sequence = np.random.SeedSequence(base_seed, spawn_key=(member_index(trial_id), iteration))
    return int(sequence.generate_state(1, dtype=np.uint32)[0])


class GRPOMember(tune.Trainable):
    """One PBT member: a GRPO learner that trains ``interval_timesteps`` env steps per Tune step."""

    def setup(
        self,
        config: dict[str, Any],
        build_model: ModelBuilder,
        evaluate: Evaluator,
        probe_states: np.ndarray,
        interval_timesteps: int,
        base_seed: int,
        min_pair_js: float,
    ) -> None:
        self._build, self._evaluate = build_model, evaluate
        self._probe_states = np.asarray(probe_states, dtype=np.float32)
        self._probe = th.as_tensor(self._probe_states)
        self._min_pair_js = min_pair_js
        self._interval, self._base_seed = interval_timesteps, base_seed
        self.model: GRPO | None = None
        self._start(config)

    def _start(self, config: dict[str, Any]) -> None:
        """A fresh model for ``config`` (on the current envs when they fit: building Fetch envs is the slow part)."""
        self.hyperparameters = {k: config[k] for k in MUTATED}
        self._exploited: dict[str, Any] | None = None
        old_env = None if self.model is None else self.model.env
        self.model = self._build(dict(self.hyperparameters), member_seed(self._base_seed, self.trial_id, 0), old_env)
        if old_env is not None and self.model.env is not old_env:
            old_env.close()

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self._start(new_config)  # an actor reused for a (resumed or exploiting) member: its config, then restore
        return True

    def step(self) -> dict[str, Any]:
        assert self.model is not None
        before = self.model.num_timesteps
        self.model.learn(self._interval, reset_num_timesteps=False)
        with th.no_grad():
            mean, log_std = self.model.policy.distribution_params(self._probe)
        result = {
            METRIC: float(self._evaluate(self.model)),
            "timesteps_this_iter": int(self.model.num_timesteps - before),
            "member_env_steps": int(self.model.num_timesteps),
            "probe_mean": mean.numpy().tolist(),
            "probe_log_std": log_std.detach().numpy().tolist(),
            "hyperparameters": dict(self.hyperparameters),
            "exploited": self._exploited or {},
        }
        self._exploited = None
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        assert self.model is not None
        folder = Path(checkpoint_dir)
        self.model.save(folder / MODEL_FILE)
        info = {"member": self.trial_id, "hyperparameters": self.hyperparameters, "env_steps": self.model.num_timesteps}
        (folder / MEMBER_FILE).write_text(json.dumps(info))

    def load_checkpoint(self, checkpoint_dir: str | dict) -> None:
        """Restore a member: its own checkpoint (resume) or another's (exploit: weights, optimizer, counters)."""
        assert self.model is not None and isinstance(checkpoint_dir, str)
        folder = Path(checkpoint_dir)
        info = json.loads((folder / MEMBER_FILE).read_text())
        # this member's envs and group layout (built for its config by reset_config), the checkpoint's weights
        layout = {key: getattr(self.model, key) for key in (*MUTATED, "n_groups")}
        self.model = GRPO.load(folder / MODEL_FILE, env=self.model.env, device="cpu", custom_objects=layout)
        seed = member_seed(self._base_seed, self.trial_id, self.iteration)
        self.model.set_random_seed(seed)
        if info["member"] != self.trial_id:
            moved = perturb_until_distinct(self.model.policy, self._probe_states, self._min_pair_js, seed)
            self._exploited = {
                "from": info["member"],
                "donor_hyperparameters": info["hyperparameters"],
                "hyperparameters": dict(self.hyperparameters),
                "perturbation": moved._asdict(),
            }

    def _close_env(self) -> None:
        if self.model is not None and self.model.env is not None:
            self.model.env.close()

    def cleanup(self) -> None:
        self._close_env()

"""Population-based training (PBT, Jaderberg et al. 2017, https://arxiv.org/abs/1711.09846) of GRPO on Ray Tune.

N members train side by side (:class:`GRPOMember`, a Tune Trainable). Every ``interval_timesteps`` env steps
Tune's synchronous :class:`~ray.tune.schedulers.PopulationBasedTraining` ranks them by deterministic success:
the worst ``ceil(quantile_fraction * N)`` copy the weights (through Tune's checkpoints) and hyperparameters of a
member of the best ``ceil(quantile_fraction * N)`` (exploit), then perturb learning rate, clip range, group size
and entropy coefficient (explore: x1.2 or x0.8, a neighbouring group size, or a fresh draw). The default fraction
0.15 replaces 2 of 10 members (20%), 2 of 8 and 3 of 16 (Tune rounds up; 0.2 would sit on the rounding edge).

:class:`PopulationLog` (a Tune callback) writes one JSON line per exploit and one per interval, with the
population's diversity: the mean pairwise Jensen-Shannon divergence of the members' action laws on fixed
probe states (:mod:`robot_grpo.scale.diversity`). PBT's pairing is random, so two population runs differ.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from ray import tune
from ray.tune.schedulers import PopulationBasedTraining
from stable_baselines3.common.vec_env import VecEnv

from robot_grpo.grpo import GRPO
from robot_grpo.scale.diversity import mean_pairwise_js

MUTATED = ("learning_rate", "clip_range", "group_size", "ent_coef")
DEFAULT_QUANTILE_FRACTION = 0.15  # ceil(0.15 N): 2 of 10 members replaced (20%)
DEFAULT_RESAMPLE_PROBABILITY = 0.25  # Tune's default: explore draws afresh instead of perturbing
DEFAULT_PERTURBATION_FACTORS = (1.2, 0.8)
METRIC = "success"  # deterministic success rate of a member's policy, 0..1
TIME_ATTR = "timesteps_total"  # perturbation intervals are counted in env steps (Tune sums timesteps_this_iter)
MODEL_FILE = "model.zip"
MEMBER_FILE = "member.json"

# (mutated hyperparameters, seed, envs to reuse if they fit or None) -> a new GRPO on its envs. Give every member
# the same env steps per update (e.g. n_groups = envs / group_size): PBT ranks members after equal env steps, and
# the per-interval log groups the members' results by Tune iteration.
ModelBuilder = Callable[[dict[str, Any], int, VecEnv | None], GRPO]
Evaluator = Callable[[GRPO], float]  # a model -> its deterministic success rate

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mutations:
    """Ranges of the mutated hyperparameters: initial draws come from them and perturbed values stay in them.

    :param learning_rate: log-uniform range.
    :param clip_range: uniform range of the clip epsilon.
    :param ent_coef: uniform range of the entropy coefficient.
    :param group_size: the group sizes a member may use (explore moves to a neighbour in this list).
    """

    learning_rate: tuple[float, float] = (1e-4, 1e-3)
    clip_range: tuple[float, float] = (0.1, 0.3)
    ent_coef: tuple[float, float] = (0.0, 0.01)
    group_size: tuple[int, ...] = (4, 6, 8, 12)

    def __post_init__(self) -> None:
        for name in ("learning_rate", "clip_range", "ent_coef"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(f"mutations.{name} must be [low, high] with 0 <= low <= high, got {[low, high]}")
        if self.learning_rate[0] <= 0 or self.clip_range[0] <= 0:
            raise ValueError("mutations.learning_rate and mutations.clip_range need a low bound > 0")
        if not self.group_size or min(self.group_size) < 2:
            raise ValueError(f"mutations.group_size must list group sizes >= 2, got {list(self.group_size)}")

    def search_space(self) -> dict[str, Any]:
        """Tune's initial distributions (param_space)."""
        return {
            "learning_rate": tune.loguniform(*self.learning_rate),
            "clip_range": tune.uniform(*self.clip_range),
            "ent_coef": tune.uniform(*self.ent_coef),
            "group_size": tune.choice(list(self.group_size)),
        }

    def mutation_space(self) -> dict[str, Any]:
        """PBT's hyperparam_mutations (a plain list: explore shifts to a neighbouring group size)."""
        return {**self.search_space(), "group_size": list(self.group_size)}

    def clamp(self, config: dict[str, Any]) -> dict[str, Any]:
        """Keep perturbed values inside their ranges (PBT's custom_explore_fn)."""
        for name in ("learning_rate", "clip_range", "ent_coef"):
            low, high = getattr(self, name)
            config[name] = float(min(max(config[name], low), high))
        return config


@dataclass(frozen=True)
class PopulationConfig:
    """One population run.

    :param members: learners (N); the issue's range is 8-16, tests use 4.
    :param total_timesteps: env steps per member.
    :param interval_timesteps: env steps per member between two exploit/explore rounds.
    :param storage_path: Tune's experiment folder (absolute; checkpoints and results).
    :param quantile_fraction: share of the population replaced per round (rounded up by Tune).
    :param resample_probability: chance that explore draws a value afresh instead of perturbing it.
    :param perturbation_factors: multipliers of a perturbed float.
    :param mutations: ranges of the mutated hyperparameters.
    :param cpus_per_member: CPUs Tune reserves per member (members step their envs on one thread).
    :param seed: seed of the initial draws, the members' own seeds and PBT's pairing.
    :param name: experiment name under ``storage_path``.
    """

    members: int
    total_timesteps: int
    interval_timesteps: int
    storage_path: str
    quantile_fraction: float = DEFAULT_QUANTILE_FRACTION
    resample_probability: float = DEFAULT_RESAMPLE_PROBABILITY
    perturbation_factors: tuple[float, float] = DEFAULT_PERTURBATION_FACTORS
    mutations: Mutations = field(default_factory=Mutations)
    cpus_per_member: float = 1.0
    seed: int = 0
    name: str = "pbt"

    def __post_init__(self) -> None:
        if self.members < 2:
            raise ValueError(f"a population needs >= 2 members, got {self.members}")
        if not 0 < self.interval_timesteps <= self.total_timesteps:
            raise ValueError(
                f"interval_timesteps ({self.interval_timesteps}) must be in (0, total_timesteps = "
                f"{self.total_timesteps}]: at least one interval per member"
            )
        if not 0 < self.quantile_fraction <= 0.5:
            raise ValueError(f"quantile_fraction must be in (0, 0.5], got {self.quantile_fraction}")
        if not Path(self.storage_path).is_absolute():
            raise ValueError(f"storage_path must be absolute (Tune's requirement), got {self.storage_path!r}")

    @property
    def replaced_per_round(self) -> int:
        return min(math.ceil(self.members * self.quantile_fraction), self.members // 2)


def member_seed(base_seed: int, trial_id: str, iteration: int) -> int:
    """A member's seed for one interval: its own exploration noise and env starts, also after it copied another."""
    sequence = np.random.SeedSequence(base_seed, spawn_key=(zlib.crc32(trial_id.encode()), iteration))
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
    ) -> None:
        self._build, self._evaluate = build_model, evaluate
        self._probe = th.as_tensor(probe_states, dtype=th.float32)
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
        self.model.set_random_seed(member_seed(self._base_seed, self.trial_id, self.iteration))
        if info["member"] != self.trial_id:
            self._exploited = {
                "from": info["member"],
                "donor_hyperparameters": info["hyperparameters"],
                "hyperparameters": dict(self.hyperparameters),
            }

    def _close_env(self) -> None:
        if self.model is not None and self.model.env is not None:
            self.model.env.close()

    def cleanup(self) -> None:
        self._close_env()


class PopulationLog(tune.Callback):
    """Driver-side log of a population run: exploit events and, per interval, success and diversity.

    Writes JSON lines to ``path`` ({"event": "exploit", ...} and {"event": "interval", ...}) and logs them.
    """

    def __init__(self, path: Path, members: int) -> None:
        self.path, self.members = Path(path), members
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        self._results: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        self._env_steps = 0  # env steps the population has run so far (all members, all intervals)
        self.exploits: list[dict[str, Any]] = []
        self.intervals: list[dict[str, Any]] = []
        self._start = time.monotonic()

    @property
    def env_steps(self) -> int:
        return self._env_steps

    def _write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as out:
            out.write(json.dumps(record) + "\n")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        interval = int(result["training_iteration"])
        self._env_steps += int(result["timesteps_this_iter"])
        exploited = result.get("exploited") or {}
        if exploited:
            record = {"event": "exploit", "interval": interval - 1, "member": trial.trial_id, **exploited}
            self.exploits.append(record)
            self._write(record)
            logger.info(
                "PBT exploit after interval %d: %s copied %s and explored %s",
                interval - 1,
                trial.trial_id,
                exploited["from"],
                exploited["hyperparameters"],
            )
        self._results[interval][trial.trial_id] = result
        if len(self._results[interval]) == self.members:
            self._close_interval(interval)

    def _close_interval(self, interval: int) -> None:
        results = self._results.pop(interval)
        ids = sorted(results)
        diversity = mean_pairwise_js(
            [np.asarray(results[i]["probe_mean"]) for i in ids], [np.asarray(results[i]["probe_log_std"]) for i in ids]
        )
        record = {
            "event": "interval",
            "interval": interval,
            "env_steps_total": self._env_steps,  # synchronous PBT: no member is past this interval yet
            "diversity_js": diversity,
            "elapsed_s": time.monotonic() - self._start,  # since the population started
            "success": {i: results[i][METRIC] for i in ids},
            "hyperparameters": {i: results[i]["hyperparameters"] for i in ids},
        }
        self.intervals.append(record)
        self._write(record)
        logger.info(
            "PBT interval %d: success %s, diversity (mean pairwise JS) %.4f nats",
            interval,
            " ".join(f"{s:.2f}" for s in record["success"].values()),
            diversity,
        )


@dataclass
class PopulationResult:
    """What a population run leaves: the best member's checkpoint and the run's log."""

    best_checkpoint: Path  # a plain GRPO checkpoint (model.zip) inside Tune's checkpoint folder
    best_member: str
    best_success: float
    best_hyperparameters: dict[str, Any]
    members: list[dict[str, Any]]  # per member: id, final success, env steps, hyperparameters
    exploits: list[dict[str, Any]]
    intervals: list[dict[str, Any]]
    total_env_steps: int


def train_population(
    config: PopulationConfig,
    build_model: ModelBuilder,
    evaluate: Evaluator,
    probe_states: np.ndarray,
    log_path: Path,
) -> PopulationResult:
    """Train the population with Tune's synchronous PBT on the connected Ray; returns the best member.

    :param config: the run.
    :param build_model: ``(hyperparameters, seed) -> GRPO`` on the member's own envs (picklable).
    :param evaluate: ``model -> success rate`` (picklable), the PBT score.
    :param probe_states: flat observations ``[S, obs_dim]`` of the diversity figure.
    :param log_path: JSON-lines log of exploits and intervals.
    """
    from ray.tune import CheckpointConfig, RunConfig, TuneConfig, Tuner
    from ray.tune.search.basic_variant import BasicVariantGenerator

    random.seed(config.seed)  # PBT pairs members with python's random
    mutations = config.mutations
    scheduler = PopulationBasedTraining(
        time_attr=TIME_ATTR,
        metric=METRIC,
        mode="max",
        perturbation_interval=config.interval_timesteps,
        hyperparam_mutations=mutations.mutation_space(),
        quantile_fraction=config.quantile_fraction,
        resample_probability=config.resample_probability,
        perturbation_factors=config.perturbation_factors,
        custom_explore_fn=mutations.clamp,
        synch=True,
    )
    trainable = tune.with_resources(
        tune.with_parameters(
            GRPOMember,
            build_model=build_model,
            evaluate=evaluate,
            probe_states=probe_states,
            interval_timesteps=config.interval_timesteps,
            base_seed=config.seed,
        ),
        {"cpu": config.cpus_per_member},
    )
    log = PopulationLog(log_path, config.members)
    tuner = Tuner(
        trainable,
        param_space=mutations.search_space(),
        tune_config=TuneConfig(
            num_samples=config.members,
            scheduler=scheduler,
            search_alg=BasicVariantGenerator(random_state=config.seed),  # seeded initial draws
            reuse_actors=True,  # a paused member resumes on a live actor instead of a new process
        ),
        run_config=RunConfig(
            name=config.name,
            storage_path=config.storage_path,
            stop={TIME_ATTR: config.total_timesteps},
            checkpoint_config=CheckpointConfig(checkpoint_at_end=True),
            callbacks=[log],
            verbose=0,
        ),
    )
    results = tuner.fit()
    errors = [r.error for r in results if r.error is not None]
    if errors:
        raise RuntimeError(f"{len(errors)} population member(s) failed; first error: {errors[0]}")
    best = results.get_best_result(metric=METRIC, mode="max", scope="last")
    if best.checkpoint is None:
        raise RuntimeError("the best population member left no checkpoint")
    members = [
        {
            "member": r.metrics["trial_id"],
            "success": r.metrics[METRIC],
            "env_steps": r.metrics["member_env_steps"],  # its model's count (a copied member inherits the donor's)
            "hyperparameters": r.metrics["hyperparameters"],
        }
        for r in results
    ]
    return PopulationResult(
        best_checkpoint=Path(best.checkpoint.path) / MODEL_FILE,
        best_member=best.metrics["trial_id"],
        best_success=float(best.metrics[METRIC]),
        best_hyperparameters=dict(best.metrics["hyperparameters"]),
        members=members,
        exploits=log.exploits,
        intervals=log.intervals,
        total_env_steps=log.env_steps,
    )

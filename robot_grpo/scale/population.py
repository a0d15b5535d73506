"""Population-based training (PBT, Jaderberg et al. 2017, https://arxiv.org/abs/1711.09846) of GRPO on Ray Tune.

N members (:class:`~robot_grpo.scale.pbt_member.GRPOMember`, a Tune Trainable) train side by side. Every
``interval_timesteps`` env steps Tune's synchronous :class:`~ray.tune.schedulers.PopulationBasedTraining` ranks
them by deterministic success: the worst ``ceil(quantile_fraction * N)`` copy the weights (through Tune's
checkpoints) and hyperparameters of a member of the best ``ceil(quantile_fraction * N)`` (exploit), then perturb
learning rate, clip range, group size and entropy coefficient (explore: x1.2 or x0.8, a neighbouring group size,
or a fresh draw). The default fraction 0.15 replaces 2 of 10 members (20%), 2 of 8 and 3 of 16 (Tune rounds up;
0.2 would sit on the rounding edge).

:class:`~robot_grpo.scale.pbt_log.PopulationLog` (a Tune callback) writes one JSON line per exploit and one per
interval, with the population's diversity: the mean pairwise Jensen-Shannon divergence of the members' action
laws on fixed probe states (:mod:`robot_grpo.scale.diversity`). PBT's pairing and explore draws come from a
random stream of the run's own (:class:`SeededPBT`) and the members' seeds from their places in the population,
so two runs of one config on one machine repeat.

The population keeps its diversity (:class:`SeededPBT`): at every round, a member whose action law lies closer
than ``min_pair_js`` to another's (the weaker of the pair) is replaced as the bottom members are, and every
member that copies another is perturbed until it is ``min_pair_js`` away from its donor
(:mod:`robot_grpo.scale.weight_perturbation`): no round ends with two copies of one policy. The default threshold,
0.001 nats, is two thirds of the population's mean pairwise JS at its most uniform in the hard reach benchmark
(see ``DEFAULT_MIN_PAIR_JS``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ray import tune
from ray.tune.schedulers import PopulationBasedTraining

from robot_grpo.scale.diversity import collapsed_members, pairwise_js
from robot_grpo.scale.pbt_log import PopulationLog
from robot_grpo.scale.pbt_member import METRIC, MODEL_FILE, Evaluator, GRPOMember, ModelBuilder

DEFAULT_QUANTILE_FRACTION = 0.15  # ceil(0.15 N): 2 of 10 members replaced (20%)
DEFAULT_RESAMPLE_PROBABILITY = 0.25  # Tune's default: explore draws afresh instead of perturbing
DEFAULT_PERTURBATION_FACTORS = (1.2, 0.8)
# Nats. Measured on the hard reach (benchmarks/scale_out.py, 8 members, 2,400 env steps per member and interval):
# without any diversity keeping the population's mean pairwise JS was 0.0015 after the first interval and
# 0.003-0.009 after the next four (exploited members start as exact copies: 0). Members start from nearly one law
# (the output layer's small init puts every mean near 0 with the same std), so after the first interval 5 of 28
# pairs sat below 0.001 (closest 0.0006); in the runs with the threshold acting, every later interval's closest
# pair was above 0.0024. 0.001 is two thirds of the population's spread at its most uniform: a pair closer than that
# is one policy twice (a copy, or two members that collapsed onto one), while members that trained apart stay above.
DEFAULT_MIN_PAIR_JS = 0.001
# A pair below the threshold is a collapse only in a population that has spread out: while the mean pairwise JS is
# under this multiple of the threshold (all members still near their common initial law, as after the first
# interval of the hard reach: mean 0.0015), replacing the "closest" members by copies of the best would only make
# the population more alike (without this rule 4 of 8 members were replaced after the first interval).
COLLAPSE_SPREAD_FACTOR = 2.0
TIME_ATTR = "timesteps_total"  # perturbation intervals are counted in env steps (Tune sums timesteps_this_iter)


class SeededPBT(PopulationBasedTraining):
    """Tune's PBT drawing its pairing and explore values from a random stream of its own.

    Tune's PBT draws from python's global ``random`` (pairing, perturb-or-resample, factors) and numpy's global
    generator (resampled values). Other code in the driver draws from them too, as many times as its timing
    makes it, so seeding the globals once did not make two runs pair and explore alike. Each scheduler hook
    swaps the run's own states in and out.
    """

    def __init__(
        self, *args: Any, seed: int, min_pair_js: float, log: PopulationLog | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._python_state = random.Random(seed).getstate()
        self._numpy_state = np.random.RandomState(seed).get_state()
        self.min_pair_js = min_pair_js
        self._log = log

    def _quantiles(self) -> tuple[list[Any], list[Any]]:
        """Tune's bottom and top members, plus the weaker member of every pair closer than ``min_pair_js``.

        A collapsed member joins the bottom: it copies a top member and is perturbed away from it
        (``GRPOMember.load_checkpoint``). A top member is never moved (both of a pair at the top stay). Nothing is
        flagged while the population's mean pairwise JS is below ``COLLAPSE_SPREAD_FACTOR * min_pair_js``.
        """
        lower, upper = super()._quantiles()
        trials = sorted(
            (t for t, s in self._trial_state.items() if s.last_result and "probe_mean" in s.last_result),
            key=lambda t: t.trial_id,
        )
        if len(trials) < 2:
            return lower, upper
        results = [self._trial_state[t].last_result for t in trials]
        js = pairwise_js(
            [np.asarray(r["probe_mean"]) for r in results], [np.asarray(r["probe_log_std"]) for r in results]
        )
        if js[np.triu_indices(len(trials), k=1)].mean() < COLLAPSE_SPREAD_FACTOR * self.min_pair_js:
            return lower, upper  # the whole population is still near its common initial law: nobody copied anyone
        for copy, kept, value in collapsed_members(js, [r[METRIC] for r in results], self.min_pair_js):
            trial = trials[copy]
            if trial in lower or trial in upper or trial.is_finished():
                continue
            lower.append(trial)
            record = {
                "event": "collapse",
                "interval": int(results[copy]["training_iteration"]),
                "member": trial.trial_id,
                "close_to": trials[kept].trial_id,
                "js": value,
                "min_pair_js": self.min_pair_js,
            }
            if self._log is not None:
                self._log.collapse(record)
        return lower, upper

    @contextmanager
    def _own_random_streams(self) -> Iterator[None]:
        outer_python, outer_numpy = random.getstate(), np.random.get_state()
        random.setstate(self._python_state)
        np.random.set_state(self._numpy_state)
        try:
            yield
        finally:
            self._python_state, self._numpy_state = random.getstate(), np.random.get_state()
            random.setstate(outer_python)
            np.random.set_state(outer_numpy)

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        with self._own_random_streams():
            super().on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        with self._own_random_streams():
            return super().on_trial_result(tune_controller, trial, result)


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
    :param min_pair_js: nats; a member closer than this to another (the weaker of the two) is replaced and
        perturbed, and every copy is perturbed at least this far from its donor (see the module docstring).
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
    min_pair_js: float = DEFAULT_MIN_PAIR_JS
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
        if not 0.0 < self.min_pair_js < math.log(2.0):
            raise ValueError(f"min_pair_js must be in (0, ln 2 = 0.693) nats, got {self.min_pair_js}")
        if not Path(self.storage_path).is_absolute():
            raise ValueError(f"storage_path must be absolute (Tune's requirement), got {self.storage_path!r}")

    @property
    def replaced_per_round(self) -> int:
        return min(math.ceil(self.members * self.quantile_fraction), self.members // 2)


@dataclass
class PopulationResult:
    """What a population run leaves: the best member's checkpoint and the run's log."""

    best_checkpoint: Path  # a plain GRPO checkpoint (model.zip) inside Tune's checkpoint folder
    best_member: str
    best_success: float
    best_hyperparameters: dict[str, Any]
    members: list[dict[str, Any]]  # per member: id, final success, env steps, hyperparameters
    exploits: list[dict[str, Any]]
    collapses: list[dict[str, Any]]  # members replaced because they sat closer than min_pair_js to another
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

    mutations = config.mutations
    log = PopulationLog(log_path, config.members, config.min_pair_js)
    scheduler = SeededPBT(
        seed=config.seed,
        min_pair_js=config.min_pair_js,
        log=log,
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
            min_pair_js=config.min_pair_js,
        ),
        {"cpu": config.cpus_per_member},
    )
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
        collapses=log.collapses,
        intervals=log.intervals,
        total_env_steps=log.env_steps,
    )

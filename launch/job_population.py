"""``robot-grpo population``: PBT of GRPO learners on Ray Tune; the best member ends as ``runs/<name>/model.zip``.

Writes ``population_log.jsonl`` (exploit events and, per interval, success, hyperparameters and the diversity
figure), ``population_summary.json`` and the best member's checkpoint, which ``robot-grpo export`` takes.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
from pathlib import Path
from typing import Any

from deploy.export.rollouts import closed_loop_success, make_env
from launch.job_train import RESERVED as TRAIN_RESERVED
from launch.jobs import write_resolved
from launch.training import EVAL_SEED_BASE, check_hyperparameters, env_kwargs_as_data, env_kwargs_from, shipped_action

MUTATED_KEYS = ("learning_rate", "clip_range", "group_size", "ent_coef")
RESERVED = (*TRAIN_RESERVED, *MUTATED_KEYS)  # what the job sets itself, and what PBT mutates
PROBE_SEED = 2_000_000  # probe states of the diversity figure: seeds disjoint from training's and evaluation's


class MemberBuilder:
    """Builds a member's GRPO on its own envs (picklable: Tune ships it to every member).

    Every member runs ``envs_per_update`` envs (``n_groups = envs_per_update / group_size``): the same env steps
    per update whatever its group size, so members are ranked at equal env steps and keep their envs when PBT
    changes their group size.

    :param env_id: registered env id.
    :param env_kwargs: env constructor arguments.
    :param hyperparameters: the fixed GRPO arguments of every member (not n_groups).
    :param envs_per_update: envs of every member (a multiple of every group size it may get).
    """

    def __init__(
        self, env_id: str, env_kwargs: dict[str, Any], hyperparameters: dict[str, Any], envs_per_update: int
    ) -> None:
        self.env_id, self.env_kwargs, self.hyperparameters = env_id, env_kwargs, hyperparameters
        self.envs_per_update = envs_per_update

    def __call__(self, mutated: dict[str, Any], seed: int, env: Any = None) -> Any:
        """A new GRPO for ``mutated`` on ``env`` when it has the envs the group size needs, else on new envs."""
        from stable_baselines3.common.env_util import make_vec_env

        from robot_grpo.grpo import GRPO

        group_size = int(mutated["group_size"])
        if self.envs_per_update % group_size:
            raise ValueError(f"group_size {group_size} does not divide envs_per_update = {self.envs_per_update}")
        hyper = {**self.hyperparameters, **mutated, "n_groups": self.envs_per_update // group_size}
        if env is None or env.num_envs != self.envs_per_update:
            env = make_vec_env(
                functools.partial(make_env, self.env_id, self.env_kwargs), n_envs=self.envs_per_update, seed=seed
            )
        return GRPO("MultiInputPolicy", env, seed=seed, **hyper)  # seeds the envs too


class SuccessEvaluator:
    """Deterministic success of a member's shipped action on fixed seeded episodes (the PBT score).

    :param env_id: registered env id.
    :param env_kwargs: env constructor arguments.
    :param episodes: episodes per evaluation (seeds ``EVAL_SEED_BASE + i``, as ``robot-grpo train`` evaluates).
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], episodes: int) -> None:
        self.env_id, self.env_kwargs = env_id, env_kwargs
        self.seeds = [EVAL_SEED_BASE + i for i in range(episodes)]
        self._env: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_env": None}  # the env is built where the evaluator runs

    def __call__(self, model: Any) -> float:
        if self._env is None:
            self._env = make_env(self.env_id, self.env_kwargs)
        return float(closed_loop_success(self._env, shipped_action(model), self.seeds).mean())


def population(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Run the population as the launch config says; returns the summary (also written next to the model)."""
    import envs  # noqa: F401  (registers the env ids)
    from launch.ray_session import ray_connection
    from robot_grpo.grpo import GRPO
    from robot_grpo.scale.diversity import probe_states
    from robot_grpo.scale.population import Mutations, PopulationConfig, train_population

    hyper = dict(config["hyperparameters"])
    check_hyperparameters(GRPO, hyper, RESERVED)
    env_id, env_kwargs = config["env"]["id"], env_kwargs_from(config["env"])
    mutations = config["mutations"]
    pbt = PopulationConfig(
        members=config["members"],
        total_timesteps=config["total_timesteps"],
        interval_timesteps=config["interval_timesteps"],
        storage_path=str((run_dir / "tune").resolve()),
        quantile_fraction=config["quantile_fraction"],
        resample_probability=config["resample_probability"],
        mutations=Mutations(
            learning_rate=tuple(mutations["learning_rate"]),
            clip_range=tuple(mutations["clip_range"]),
            ent_coef=tuple(mutations["ent_coef"]),
            group_size=tuple(mutations["group_size"]),
        ),
        cpus_per_member=config["cpus_per_member"],
        min_pair_js=config["min_pair_js"],
        seed=config["seed"],
    )
    member_env_kwargs = env_kwargs_as_data(env_id, env_kwargs)  # members build envs on any machine: data, no path
    probe_env = make_env(env_id, member_env_kwargs)
    probes = probe_states(probe_env, config["diversity_states"], PROBE_SEED)
    probe_env.close()
    start = time.perf_counter()
    with ray_connection(config["scale"]["address"], config["scale"]["auth_token_file"]):
        result = train_population(
            pbt,
            MemberBuilder(env_id, member_env_kwargs, hyper, config["envs_per_update"]),
            SuccessEvaluator(env_id, member_env_kwargs, config["eval_episodes"]),
            probes,
            run_dir / "population_log.jsonl",
        )
    wall_s = time.perf_counter() - start
    shutil.copyfile(result.best_checkpoint, run_dir / "model.zip")
    summary = {
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "members": config["members"],
        "replaced_per_round": pbt.replaced_per_round,
        "envs_per_update": config["envs_per_update"],
        "total_env_steps": result.total_env_steps,
        "wall_s": wall_s,
        "best_member": result.best_member,
        "best_success": result.best_success,
        "best_hyperparameters": result.best_hyperparameters,
        "exploits": len(result.exploits),
        "collapses": len(result.collapses),
        "min_pair_js": config["min_pair_js"],
        "diversity_js": [round(r["diversity_js"], 6) for r in result.intervals],
        "closest_pair_js": [round(r["min_pair_js"], 6) for r in result.intervals],
        "members_final": result.members,
        "model": str(run_dir / "model.zip"),
    }
    (run_dir / "population_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    summary = population(config, run_dir)
    print(
        f"population of {summary['members']}: {summary['total_env_steps']} env steps in {summary['wall_s']:.0f} s, "
        f"{summary['exploits']} exploit steps; best member {100 * summary['best_success']:.0f}% "
        f"-> {summary['model']}"
    )
    return 0

"""``robot-grpo train``: GRPO + hindsight on the simulated task; writes model.zip, curve and summary."""

from __future__ import annotations

import functools
import json
import logging
import time
from pathlib import Path
from typing import Any

from deploy.export.rollouts import make_env
from launch.cell_training import is_cell_env
from launch.demonstrations import clone_demonstrations
from launch.jobs import write_resolved
from launch.report import plot_learning_curve
from launch.train_backends import BACKENDS
from launch.training import (
    SuccessEvalCallback,
    check_hyperparameters,
    env_kwargs_as_data,
    env_kwargs_from,
    safety_filter_check,
    shipped_action,
)

RESERVED = ("policy", "env", "seed", "tensorboard_log", "verbose")

logger = logging.getLogger(__name__)


def train(config: dict[str, Any], run_dir: Path, progress_bar: bool = True) -> dict[str, Any]:
    """Train as the launch config says; returns the summary (also written to ``run_dir/train_summary.json``)."""
    import envs  # noqa: F401  (registers the env ids)
    from robot_grpo.grpo import GRPO

    section = config["train"]
    hyper = dict(section["hyperparameters"])
    check_hyperparameters(GRPO, hyper, RESERVED)
    env_id, env_kwargs = config["env"]["id"], env_kwargs_from(config["env"], training=True)
    # A callable, not the id: make_vec_env would ask the env for an rgb_array render mode it has no use for. The
    # robot spec travels inside it as data (Ray workers resolve no path of this machine).
    env_factory = functools.partial(make_env, env_id, env_kwargs_as_data(env_id, env_kwargs))
    backend = BACKENDS[config["scale"]["backend"]](env_factory, config["scale"], section["env_threads"])
    try:
        model = backend.build_model(hyper, section["seed"], run_dir)
        start = time.perf_counter()
        cloned = clone_demonstrations(section["demonstrations"], env_factory, None, model, section["seed"])
        return _train(config, run_dir, progress_bar, backend, model, cloned, time.perf_counter() - start)
    finally:
        backend.close()


def _train(
    config: dict[str, Any],
    run_dir: Path,
    progress_bar: bool,
    backend: Any,
    model: Any,
    cloned: dict[str, float] | None = None,
    clone_s: float = 0.0,
) -> dict[str, Any]:
    """GRPO from ``model`` (``cloned``: the behaviour-cloned start's figures, None without one; ``clone_s``: the
    seconds it took, counted in ``wall_s``)."""
    section = config["train"]
    env_id, env_kwargs = config["env"]["id"], env_kwargs_from(config["env"])
    callback = SuccessEvalCallback(env_id, env_kwargs, section["eval_episodes"], section["target_success"])
    start = time.perf_counter() - clone_s
    model.learn(section["total_timesteps"], callback=callback, progress_bar=progress_bar)
    wall_s = time.perf_counter() - start
    model.save(run_dir / "model.zip")
    callback.save(run_dir / "learning_curve.json")
    curve = callback.curve
    plot_learning_curve(
        [p["steps"] for p in curve], [p["success"] for p in curve], run_dir / "learning_curve.png", f"GRPO on {env_id}"
    )
    summary = {
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "seed": section["seed"],
        "env_steps": int(model.num_timesteps),
        "demonstrations": cloned,  # the behaviour-cloned start (its env_steps come on top of env_steps), or None
        "wall_s": wall_s,
        "final_success": curve[-1]["success"],
        "reached_target": callback.reached_target,
        "model": str(run_dir / "model.zip"),
        "behind_safety_filter": safety_filter_check(env_id, env_kwargs, shipped_action(model), callback.seeds),
    }
    filtered = summary["behind_safety_filter"]
    if filtered is not None and (filtered["interventions_per_episode"] > 0 or filtered["safe_stops"] > 0):
        logger.warning(
            "the trained policy leans on the safety filter: %.2f interventions per episode, %d safe stops behind "
            "the calibration's limits. Policies trained far past their success target take larger steps; stop "
            "earlier (train.target_success / train.total_timesteps) before deploying it",
            filtered["interventions_per_episode"],
            filtered["safe_stops"],
        )
    summary["scale"] = backend.describe()
    (run_dir / "train_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    if is_cell_env(config["env"]["id"]):
        from launch.job_train_cell import train_cell

        summary = train_cell(config, run_dir)
        print(
            f"trained {summary['env_steps']} cell steps in {summary['wall_s']:.1f} s: team success "
            f"{100 * summary['final_success']:.0f}%, {summary['final_violations_per_1000']:.0f} separation violations "
            f"per 1,000 episodes -> {summary['model']}"
        )
        return 0 if summary["reached_target"] else 1
    summary = train(config, run_dir)
    filtered = summary["behind_safety_filter"]
    behind = ""
    if filtered is not None:
        behind = (
            f"; behind the safety filter {100 * filtered['success_rate']:.0f}% with "
            f"{filtered['interventions_per_episode']:.2f} interventions per episode"
        )
    cloned = summary["demonstrations"]
    demonstrated = "" if cloned is None else f" after {int(cloned['env_steps'])} demonstrated"
    print(
        f"trained {summary['env_steps']} env steps{demonstrated} in {summary['wall_s']:.1f} s: "
        f"deterministic success {100 * summary['final_success']:.0f}%{behind} -> {summary['model']}"
    )
    return 0 if summary["reached_target"] else 1

"""``robot-grpo train``: GRPO + hindsight on the simulated task; writes model.zip, curve and summary."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from deploy.export.rollouts import make_env
from launch.jobs import write_resolved
from launch.report import plot_learning_curve
from launch.training import (
    SuccessEvalCallback,
    check_hyperparameters,
    env_kwargs_from,
    safety_filter_check,
    shipped_action,
)

RESERVED = ("policy", "env", "seed", "tensorboard_log", "verbose")

logger = logging.getLogger(__name__)


def train(config: dict[str, Any], run_dir: Path, progress_bar: bool = True) -> dict[str, Any]:
    """Train as the launch config says; returns the summary (also written to ``run_dir/train_summary.json``)."""
    from stable_baselines3.common.env_util import make_vec_env

    import envs  # noqa: F401  (registers the env ids)
    from robot_grpo.grpo import DEFAULT_GROUP_SIZE, DEFAULT_N_GROUPS, GRPO
    from robot_grpo.threaded_vec_env import ThreadedVecEnv

    section = config["train"]
    hyper = dict(section["hyperparameters"])
    check_hyperparameters(GRPO, hyper, RESERVED)
    env_id, env_kwargs = config["env"]["id"], env_kwargs_from(config["env"])
    n_envs = int(hyper.get("group_size", DEFAULT_GROUP_SIZE)) * int(hyper.get("n_groups", DEFAULT_N_GROUPS))
    # A callable, not the id: make_vec_env would ask the env for an rgb_array render mode it has no use for.
    vec_env = make_vec_env(
        lambda: make_env(env_id, env_kwargs),
        n_envs=n_envs,
        seed=section["seed"],
        vec_env_cls=ThreadedVecEnv,  # MuJoCo releases the GIL: the envs step in parallel, bit-identically
        vec_env_kwargs={"n_threads": section["env_threads"]},
    )
    model = GRPO("MultiInputPolicy", vec_env, seed=section["seed"], tensorboard_log=str(run_dir / "tb"), **hyper)
    callback = SuccessEvalCallback(env_id, env_kwargs, section["eval_episodes"], section["target_success"])
    start = time.perf_counter()
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
    (run_dir / "train_summary.json").write_text(json.dumps(summary, indent=2))
    vec_env.close()
    return summary


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    summary = train(config, run_dir)
    filtered = summary["behind_safety_filter"]
    behind = ""
    if filtered is not None:
        behind = (
            f"; behind the safety filter {100 * filtered['success_rate']:.0f}% with "
            f"{filtered['interventions_per_episode']:.2f} interventions per episode"
        )
    print(
        f"trained {summary['env_steps']} env steps in {summary['wall_s']:.1f} s: "
        f"deterministic success {100 * summary['final_success']:.0f}%{behind} -> {summary['model']}"
    )
    return 0 if summary["reached_target"] else 1

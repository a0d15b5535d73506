"""``robot-grpo train`` on the two-arm cell (``TwoArmCell-v0``): CellGRPO, evaluated on fixed cell episodes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from launch.cell_training import CellEvalCallback, build_cell_model, evaluate_cell, model_act
from launch.report import plot_learning_curve
from launch.schema import LaunchError
from launch.training import env_kwargs_from

RESERVED = ("policy", "env", "seed", "tensorboard_log", "verbose")
CELL_UNSUPPORTED = ("restart_fraction",)


def check_cell_hyperparameters(hyperparameters: dict[str, Any]) -> None:
    """Refuse launch-file keys that neither CellGRPO nor the GRPO it passes ``**kwargs`` to takes."""
    import inspect

    from robot_grpo import GRPO, CellGRPO

    names = set(inspect.signature(CellGRPO.__init__).parameters) | set(inspect.signature(GRPO.__init__).parameters)
    skip = {"self", "kwargs", *RESERVED, *CELL_UNSUPPORTED}
    allowed = sorted(n for n in names if n not in skip and not n.startswith("_"))
    for key in hyperparameters:
        if key not in allowed:
            raise LaunchError(f"unknown key 'train.hyperparameters.{key}'; allowed keys: {', '.join(allowed)}")


def updates_steps(model: Any) -> int:
    """Cell steps per update (group_size x n_groups cells run n_steps control steps each)."""
    return int(model.n_envs * model.n_steps)


def train_cell(config: dict[str, Any], run_dir: Path, progress_bar: bool = True) -> dict[str, Any]:
    """Train CellGRPO as the launch config says; returns the summary (also written to ``train_summary.json``)."""
    section = config["train"]
    hyper = dict(section["hyperparameters"])
    check_cell_hyperparameters(hyper)
    env_kwargs = env_kwargs_from(config["env"])
    model = build_cell_model(hyper, env_kwargs, section["seed"], section["env_threads"], run_dir)
    try:
        every = section["eval_every"] or updates_steps(model)
        callback = CellEvalCallback(env_kwargs, section["eval_episodes"], section["target_success"], every)
        start = time.perf_counter()
        model.learn(section["total_timesteps"], callback=callback, progress_bar=progress_bar)
        wall_s = time.perf_counter() - start
        model.save(run_dir / "model.zip")
    finally:
        model.env.close()
    curve = callback.curve
    (run_dir / "learning_curve.json").write_text(json.dumps(curve, indent=2))
    plot_learning_curve(
        [p["steps"] for p in curve],
        [p["success"] for p in curve],
        run_dir / "learning_curve.png",
        f"CellGRPO ({model.sharing}) on TwoArmCell-v0",
    )
    summary = {
        "env_id": config["env"]["id"],
        "env_kwargs": env_kwargs,
        "seed": section["seed"],
        "sharing": model.sharing,
        "env_steps": int(model.num_timesteps),
        "wall_s": wall_s,
        "eval_s": callback.eval_s,
        "final_success": curve[-1]["success"],
        "final_violations_per_1000": curve[-1]["violations_per_1000"],
        "reached_target": callback.reached_target,
        "model": str(run_dir / "model.zip"),
        "scale": {"backend": "threaded", "env_threads": section["env_threads"]},
    }
    (run_dir / "train_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def evaluate_cell_checkpoint(checkpoint: str | Path, env_kwargs: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """``robot-grpo eval`` on the cell: a CellGRPO checkpoint (.zip) on seeded cell episodes."""
    from robot_grpo import CellGRPO

    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise FileNotFoundError(f"{checkpoint} is not a CellGRPO checkpoint file (.zip from robot-grpo train)")
    model = CellGRPO.load(str(checkpoint), device="cpu")
    return evaluate_cell(model_act(model), env_kwargs, seeds)

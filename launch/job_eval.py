"""``robot-grpo eval``: deterministic closed-loop success of a checkpoint or a policy package in simulation."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from launch.cell_training import is_cell_env
from launch.jobs import write_resolved
from launch.training import env_kwargs_from

ActFn = Any
logger = logging.getLogger(__name__)


def policy_act_fn(source: str | Path, backend: str = "ort-cpu", variant: str = "fp32") -> tuple[ActFn, int]:
    """An act function (flat float32 [B, D] -> [B, A]) for a package folder or a GRPO checkpoint (.zip), and D."""
    source = Path(source)
    if source.is_dir():
        from deploy.runtime.package import load_package

        package = load_package(source)
        return package.make_backend(backend, variant), package.contract.flat_dim
    if not source.is_file():
        raise FileNotFoundError(f"{source} is neither a policy package folder nor a GRPO checkpoint file")
    import torch

    from robot_grpo.grpo import GRPO
    from robot_grpo.policies import flat_obs_dim

    model = GRPO.load(str(source), device="cpu")
    module = model.policy.make_export_module().eval()

    def act(flat: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return module(torch.as_tensor(flat)).numpy()

    return act, flat_obs_dim(model.observation_space)


def make_env_for_policy(env_id: str, env_kwargs: dict[str, Any], policy_flat_dim: int) -> Any:
    """The env, its observed action history matched to the policy's (a robot whose delay changed since training
    keeps the policy's contract: the policy sees as many past commands as it was trained with)."""
    from deploy.export.rollouts import env_contract, make_env

    env = make_env(env_id, env_kwargs)
    contract = env_contract(env)
    if contract.flat_dim == policy_flat_dim:
        return env
    env.close()
    extra = policy_flat_dim - (contract.state_dim + 2 * contract.goal_dim)
    if extra < 0 or extra % contract.action_dim:
        raise ValueError(
            f"the policy takes {policy_flat_dim} observation values, which fits no action history of the "
            f"{contract.name!r} contract ({contract.state_dim} state + k x {contract.action_dim} + goals): "
            "is it a policy for another task?"
        )
    return make_env(env_id, {**env_kwargs, "history_len": extra // contract.action_dim})


def evaluate(source: str | Path, env_id: str, env_kwargs: dict[str, Any], episodes: int, seed: int) -> float:
    """Success rate over ``episodes`` seeded episodes (seeds seed .. seed + episodes - 1)."""
    from deploy.export.rollouts import closed_loop_success

    act, flat_dim = policy_act_fn(source)
    logger.info("eval: %s on %d seeded episodes of %s %s", source, episodes, env_id, env_kwargs)
    env = make_env_for_policy(env_id, env_kwargs, flat_dim)
    try:
        return float(closed_loop_success(env, act, range(seed, seed + episodes)).mean())
    finally:
        env.close()


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    env_id, env_kwargs = config["env"]["id"], env_kwargs_from(config["env"])
    if is_cell_env(env_id):
        from launch.job_train_cell import evaluate_cell_checkpoint

        seeds = list(range(config["seed"], config["seed"] + config["episodes"]))
        cell = evaluate_cell_checkpoint(config["checkpoint"], env_kwargs, seeds)
        result = {"checkpoint": config["checkpoint"], "env_id": env_id, "env_kwargs": env_kwargs, **cell}
        (run_dir / "eval.json").write_text(json.dumps(result, indent=2))
        print(
            f"{config['checkpoint']}: team success {100 * cell['success']:.1f}%, {cell['violations']} separation "
            f"violations over {cell['episodes']} episodes on {env_id}"
        )
        return 0
    success = evaluate(config["checkpoint"], env_id, env_kwargs, config["episodes"], config["seed"])
    result = {"checkpoint": config["checkpoint"], "env_id": env_id, "env_kwargs": env_kwargs, "success": success}
    (run_dir / "eval.json").write_text(json.dumps(result, indent=2))
    print(f"{config['checkpoint']}: {100 * success:.1f}% success over {config['episodes']} episodes on {env_id}")
    return 0

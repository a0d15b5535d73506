"""``robot-grpo export``: a GRPO checkpoint -> a verified policy package, with the sim Fisher for EWC.

A cell checkpoint (``env.id: TwoArmCell-v0``, a ``CellGRPO`` run) exports one package per arm instead,
``out_dir/arm_0`` and ``out_dir/arm_1`` (``deploy.export.cell_arm``: the same weights with the arm's agent baked in,
the manifest naming the cell and the agent); they ship no EWC anchor (the robot-side fine-tuning is single-arm).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launch.cell_training import is_cell_env
from launch.jobs import CELL_ENV_ID, write_resolved
from launch.schema import LaunchError
from launch.training import env_kwargs_from


def export(config: dict[str, Any], overwrite: bool = True) -> Path:
    """Export ``config['checkpoint']`` to ``config['out_dir']``; returns the package folder."""
    from deploy.export.exporter import EwcAnchor, ExportConfig, export_package
    from deploy.export.rollouts import make_env
    from deploy.finetune.round import sim_fisher_anchor
    from robot_grpo.grpo import GRPO

    env_id, env_kwargs = config["env"]["id"], env_kwargs_from(config["env"])
    if not Path(config["checkpoint"]).is_file():
        raise FileNotFoundError(
            f"checkpoint {config['checkpoint']} does not exist; train one first (robot-grpo train writes "
            "runs/<name>/model.zip) or set checkpoint to an existing .zip"
        )
    try:
        checks = ExportConfig(
            n_parity_obs=config["parity_observations"],
            n_episodes=config["closed_loop_episodes"],
            variants=tuple(config["variants"]),
        )
    except ValueError as err:  # check sizes below what a package must be verified on, or variants without fp32
        keys = "'variants'" if "variants" in str(err) else "'parity_observations' / 'closed_loop_episodes'"
        raise LaunchError(f"{keys}: {err}") from None
    model = GRPO.load(config["checkpoint"], device="cpu")
    if is_cell_env(env_id):
        return export_cell(model, config, env_kwargs, checks, overwrite)
    env = make_env(env_id, env_kwargs)
    try:
        ewc = sim_fisher_anchor(model, env)
    finally:
        env.close()
    params, fisher = ewc.anchor_arrays()
    anchor = EwcAnchor(params, fisher, meta={"source": "sim", "env_id": env_id, "consolidations": 0})
    return export_package(
        model,
        config["out_dir"],
        env_id,
        env_kwargs,
        provenance={"checkpoint": str(config["checkpoint"])},
        ewc_anchor=anchor,
        config=checks,
        overwrite=overwrite,
    )


def export_cell(model: Any, config: dict[str, Any], env_kwargs: dict[str, Any], checks: Any, overwrite: bool) -> Path:
    """Both arms' packages of a cell model under ``config['out_dir']``; returns that folder."""
    from deploy.export.cell_arm import export_cell_arms

    if not hasattr(model.policy, "make_agent_export_module"):
        raise LaunchError(
            f"checkpoint {config['checkpoint']} holds a {type(model).__name__}, not a cell model: env.id "
            f"{CELL_ENV_ID} exports a CellGRPO run (robot-grpo train --config shipped:launch/train_cell.yaml)"
        )
    provenance = {"checkpoint": str(config["checkpoint"])}
    export_cell_arms(model, config["out_dir"], env_kwargs, checks, overwrite, provenance)
    return Path(config["out_dir"])


def main(config: dict[str, Any]) -> int:
    write_resolved(config, Path(config["output"]) / config["name"])
    package = export(config)
    if is_cell_env(config["env"]["id"]):
        print(f"exported and verified one package per arm in {package} (see arm_0/report.md, arm_1/report.md)")
        return 0
    print(f"exported and verified {package} (see {package / 'report.md'})")
    return 0

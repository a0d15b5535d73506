"""``robot-grpo export``: a GRPO checkpoint -> a verified policy package, with the sim Fisher for EWC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launch.jobs import write_resolved
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
        checks = ExportConfig(n_parity_obs=config["parity_observations"], n_episodes=config["closed_loop_episodes"])
    except ValueError as err:  # check sizes below what a package must be verified on
        raise LaunchError(f"'parity_observations' / 'closed_loop_episodes': {err}") from None
    model = GRPO.load(config["checkpoint"], device="cpu")
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


def main(config: dict[str, Any]) -> int:
    write_resolved(config, Path(config["output"]) / config["name"])
    package = export(config)
    print(f"exported and verified {package} (see {package / 'report.md'})")
    return 0

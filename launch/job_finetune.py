"""``robot-grpo finetune``: tick logs -> GRPO + EWC -> candidate package -> gate -> atomic promotion (or not)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from launch.jobs import write_resolved
from launch.schema import LaunchError
from launch.training import env_kwargs_from


def robot_env_kwargs(robot: dict[str, Any], spec: Any, history_len: int) -> dict[str, Any]:
    """Sim env kwargs of the robot's current condition: its spec (delay, noise), the launch file's explicit
    simulation settings over it (``robot.delay``, ``robot.obs_noise_std_m``, ``robot.action_gain``: how the
    simulated robot differs), and the policy's history length."""
    return {
        "spec": spec,
        "delay": spec.delay_steps if robot["delay"] is None else robot["delay"],
        "action_gain": robot["action_gain"],
        "obs_noise_std_m": robot["obs_noise_std_m"],
        "history_len": history_len,
    }


def widened_delay_range(trained: tuple[int, int], robot: tuple[int, int]) -> tuple[int, int]:
    """The delays a fine-tuned candidate counts as trained for: the running package's and the robot's now (it was
    tuned on the robot's logs and gated on both conditions), as one inclusive range in control steps."""
    return min(trained[0], robot[0]), max(trained[1], robot[1])


def seed_store(store: Any, package: str | Path, checkpoint: str | Path, name: str = "base") -> None:
    """Install and promote the running package into an empty store (a store that has one is left alone)."""
    if store.current_name() is not None:
        return
    store.install(package, name, checkpoint)
    store.promote(name, {"passed": True, "reasons": ["initial package"]})


def logged_episode_steps(logs: str | Path, running: Any, model_steps: int, action: str = "sent") -> int:
    """Transitions per logged episode of the ``running`` package to train on: the model's episode length, or the
    logs' when shorter (an episode of N policy ticks yields N - 1 transitions, since the last tick's next state is
    not logged)."""
    from deploy.finetune.dataset import load_log_dataset

    dataset = load_log_dataset(logs, running.contract, action=action, policy_id=running.policy_id)
    lengths = [len(ep.actions) for ep in dataset.episodes]
    if not lengths:
        raise ValueError(f"{logs} holds no complete episode: run the robot with explore: true to collect some")
    return min(model_steps, int(np.median(lengths)))


def finetune(config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """One round as the launch config says; returns the gate report (dict) and where the store points."""
    from deploy.export.rollouts import make_env
    from deploy.finetune.gate import GateConfig
    from deploy.finetune.promote import PackageStore
    from deploy.finetune.round import DEFAULT_INTERVENTION_PENALTY, RoundConfig, run_round
    from deploy.robot_spec import DEFAULT_SIM_SPEC, load_robot_spec
    from deploy.runtime.safety import SafetyLimits
    from robot_grpo.ewc import DEFAULT_EWC_LAMBDA
    from robot_grpo.grpo import GRPO

    store = PackageStore(config["store"])
    seed_store(store, config["package"], config["checkpoint"])
    running_name = store.current_name()
    running = store.load_current()
    env_id, env_kwargs = config["env"]["id"], env_kwargs_from(config["env"])
    model = GRPO.load(str(store.checkpoint_path(running_name)), device="cpu")
    history_len = running.contract.history_len
    spec = load_robot_spec(config["calibration"] or DEFAULT_SIM_SPEC)  # the robot as it is now
    gate_envs = {
        "original": make_env(env_id, env_kwargs),
        "current": make_env(env_id, robot_env_kwargs(config["robot"], spec, history_len)),
    }
    limits = SafetyLimits.from_spec(spec, running.contract)
    lam = DEFAULT_EWC_LAMBDA if config["ewc_lambda"] is None else config["ewc_lambda"]
    penalty = DEFAULT_INTERVENTION_PENALTY if config["intervention_penalty"] is None else config["intervention_penalty"]
    n_steps = logged_episode_steps(config["logs"], running, model.n_steps, config["trained_action"])
    candidate = f"ft-{time.strftime('%Y%m%d-%H%M%S')}"
    from robot_grpo.finetune_data import NoCompleteGroupError

    try:
        report = run_round(
            store,
            config["logs"],
            model,
            gate_envs,
            limits,
            candidate,
            env_id,
            env_kwargs,
            config=RoundConfig(
                group_size=config["group_size"],
                n_updates=config["n_updates"],
                ewc_lambda=lam,
                n_steps=n_steps,
                seed=config["seed"],
                trained_action=config["trained_action"],
                intervention_penalty=penalty,
            ),
            gate_config=GateConfig(n_episodes=config["gate_episodes"]),
            trained_delay_range=widened_delay_range(running.action_delay_steps, spec.delay_range),
        )
    except NoCompleteGroupError as err:
        raise LaunchError(f"logs {config['logs']}: {err}") from err
    finally:
        for env in gate_envs.values():
            env.close()
    result = {
        "candidate": candidate,
        "running_before": running_name,
        "current_after": store.current_name(),
        "promoted": store.current_name() == candidate,
        "ewc_lambda": lam,
        "n_updates": config["n_updates"],
        "trained_action": config["trained_action"],
        "intervention_penalty": penalty,
        "gate": report.to_dict(),
    }
    (run_dir / "finetune_report.json").write_text(json.dumps(result, indent=2, default=str))
    return result


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    result = finetune(config, run_dir)
    verdict = "promoted" if result["promoted"] else "not promoted: " + "; ".join(result["gate"]["reasons"])
    print(f"candidate {result['candidate']}: {verdict}; current = {result['current_after']} ({config['store']})")
    return 0

"""Training helpers for the composition root: a success-rate evaluation callback and env construction."""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from deploy.contract import ObservationContract
from deploy.export.rollouts import ActFn, closed_loop_success, env_contract, make_env
from launch.schema import LaunchError

EVAL_SEED_BASE = 1_000_000  # eval episodes use seeds disjoint from training's (which start at the run seed)


SPEC_ENV_IDS = ("DelayedFetchReach-v0", "DelayedFetchPushRobot-v0", "TwoArmCell-v0")  # envs built from a robot spec


TRAINING_ONLY_ENV_KEYS = ("near_goal_share",)  # shape the training episodes' starts: never in an evaluation's env


def env_kwargs_from(env_section: dict[str, Any], training: bool = False) -> dict[str, Any]:
    """The env constructor kwargs of a launch file's ``env`` section (unset keys left to the env's defaults).

    :param training: for the env the model trains on (with ``TRAINING_ONLY_ENV_KEYS``); otherwise the env its
        evaluations, checks and exports run on (the task's own starts).
    """
    dropped = ("id", "calibration") if training else ("id", "calibration", *TRAINING_ONLY_ENV_KEYS)
    kwargs = {k: v for k, v in env_section.items() if k not in dropped and v is not None}
    if "delay_range" in kwargs:
        kwargs["delay_range"] = tuple(kwargs["delay_range"])
        kwargs.pop("delay", None)
    if env_section["id"] in SPEC_ENV_IDS and env_section.get("calibration"):
        kwargs["spec"] = env_section["calibration"]  # the robot spec: the delay and noise unless overridden
    return kwargs


def env_kwargs_as_data(env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` with the robot spec loaded here, on the driver, for envs built elsewhere (Ray workers, Tune
    members): they get the spec's data, never a path that would be resolved in their own folder or machine.

    :param env_id: registered env id (DelayedFetchReach-v0 and DelayedFetchPushRobot-v0 take a spec).
    :param env_kwargs: from :func:`env_kwargs_from`; its ``spec`` is a file path or absent (the default spec).
    """
    from deploy.robot_spec import as_robot_spec

    if env_kwargs.get("safety_spec") is not None:  # the shield of an object task or the cell (envs.*_shield)
        env_kwargs = {**env_kwargs, "safety_spec": as_robot_spec(env_kwargs["safety_spec"])}
    if env_id not in ("DelayedFetchReach-v0", "DelayedFetchPushRobot-v0"):
        return dict(env_kwargs)

    if env_id == "DelayedFetchPushRobot-v0" and env_kwargs.get("spec") is None:
        return dict(env_kwargs)  # its own default spec (the push cell's), resolved where the env is built
    return {**env_kwargs, "spec": as_robot_spec(env_kwargs.get("spec"))}


def check_hyperparameters(algo_class: type, hyperparameters: dict[str, Any], reserved: tuple[str, ...]) -> None:
    """Refuse launch-file hyperparameters the algorithm does not take (never print-and-ignore)."""
    params = inspect.signature(algo_class.__init__).parameters
    allowed = sorted(p for p in params if p not in ("self", *reserved) and not p.startswith("_"))
    for key in hyperparameters:
        if key not in allowed:
            raise LaunchError(f"unknown key 'train.hyperparameters.{key}'; allowed keys: {', '.join(allowed)}")


class SuccessEvalCallback(BaseCallback):
    """Evaluate the deterministic policy on fixed seeded episodes after every update; stop at ``target``.

    The evaluation runs the policy's export module (the deterministic, clipped action that ships) through the
    contract's flat observation, as on the robot; a task without a contract (DelayedFetchPush-v0, ...) is run with
    ``model.predict(deterministic=True)``. Records (env steps, success, wall seconds) for the curve.

    :param env_id: registered env id.
    :param env_kwargs: env constructor arguments (same condition as training).
    :param n_episodes: fixed episodes per evaluation (seeds EVAL_SEED_BASE + i).
    :param target: stop training once success >= target (None: never stop early).
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], n_episodes: int, target: float | None) -> None:
        super().__init__()
        self.env = make_env(env_id, env_kwargs)
        self.seeds = [EVAL_SEED_BASE + i for i in range(n_episodes)]
        self.target = target
        self.curve: list[dict[str, float]] = []
        self._stop = False
        self._t0 = time.perf_counter()

    def evaluate(self) -> float:
        success = deterministic_success(self.env, self.model, self.seeds)
        self.curve.append(
            {"steps": int(self.num_timesteps), "success": success, "wall_s": time.perf_counter() - self._t0}
        )
        self.logger.record("eval/success_rate", success)
        if self.target is not None and success >= self.target:
            self._stop = True
        return success

    def _on_rollout_start(self) -> None:
        if self.num_timesteps > 0:
            self.evaluate()

    def _on_step(self) -> bool:
        return not self._stop

    def _on_training_end(self) -> None:
        if not self.curve or self.curve[-1]["steps"] != self.num_timesteps:
            self.evaluate()

    @property
    def reached_target(self) -> bool:
        return self._stop

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.curve, indent=2))


def deterministic_success(env: Any, model: Any, seeds: list[int]) -> float:
    """Share of seeded episodes with ``is_success`` at the end, deterministic actions (see SuccessEvalCallback)."""
    if isinstance(getattr(env.unwrapped, "contract", None), ObservationContract):
        return float(closed_loop_success(env, shipped_action(model), seeds).mean())
    successes = []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        done, info = False, {}
        while not done:
            obs, _, terminated, truncated, info = env.step(model.predict(obs, deterministic=True)[0])
            done = terminated or truncated
        successes.append(bool(info.get("is_success", False)))
    return float(np.mean(successes))


def shipped_action(model: Any) -> ActFn:
    """The trained policy's export module as a function of flat float32 observations ``[N, D]`` (no grad)."""
    import torch

    module = model.policy.make_export_module().eval()

    def act(flat: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return module(torch.as_tensor(flat)).numpy()

    return act


def safety_filter_check(env_id: str, env_kwargs: dict[str, Any], act: ActFn, seeds: list[int]) -> dict[str, Any] | None:
    """Closed-loop episodes behind the safety filter that the env's robot spec defines (as on the robot).

    A policy trained far past its success target tends to take larger steps and lean on the workspace barrier
    near the box faces; this measures it. Goals outside the box are skipped (counted).

    :return: success rate, interventions per episode, safe stops and skipped goals; None for an env without a
        robot spec (PointReach).
    """
    from deploy.finetune.gate import closed_loop_eval
    from deploy.runtime.safety import SafetyLimits

    env = make_env(env_id, env_kwargs)
    spec = getattr(env.unwrapped, "robot_spec", None)
    if spec is None:
        return None
    contract = env_contract(env)
    result = closed_loop_eval(act, env, contract, seeds, SafetyLimits.from_spec(spec, contract))
    return {
        "success_rate": result.success_rate,
        "interventions_per_episode": result.interventions_per_episode,
        "safe_stops": result.safe_stops,
        "skipped_goals": result.skipped_goals,
        "error": result.error,
    }
